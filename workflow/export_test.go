package workflow

// What the external tests compare with its definition.
var (
	ProposalDigest    = proposalDigest
	ProposalDocDigest = proposalDocDigest
)
