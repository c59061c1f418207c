package record

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"time"
)

// Status is where a run is in its life.
type Status string

// The statuses of a run. See the package documentation for the transitions.
const (
	StatusRunning         Status = "running"
	StatusWaitingApproval Status = "waiting_approval"
	StatusScheduled       Status = "scheduled" // approved, waiting for its execution window to open
	StatusExecuting       Status = "executing"
	StatusDone            Status = "done"
	StatusFailed          Status = "failed"
	StatusRejected        Status = "rejected"
	StatusExpired         Status = "expired"
	StatusCancelled       Status = "cancelled"
	StatusNeedsAttention  Status = "needs_attention"
)

// Statuses lists every status, in life order.
var Statuses = []Status{
	StatusRunning, StatusWaitingApproval, StatusScheduled, StatusExecuting, StatusDone, StatusFailed,
	StatusRejected, StatusExpired, StatusCancelled, StatusNeedsAttention,
}

// Terminal reports whether nothing more will happen to a run in this status.
// needs_attention is not terminal: it waits for a person.
func (s Status) Terminal() bool {
	switch s {
	case StatusDone, StatusFailed, StatusRejected, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Run is the row that says where a run is. Its full state lives in its checkpoints.
type Run struct {
	ID             string
	Workflow       string // "proposal" for submitted proposals, or an agent's name
	TaskID         string
	Status         Status
	Step           int    // steps completed
	Seq            int64  // seq of the latest checkpoint
	Version        int64  // compare-and-set counter
	RequesterID    string //
	IdempotencyKey string // "" when the submitter gave none
	// CallbackURL is where the run's status changes are sent ("" for none).
	// The sealed checkpoints hold it too: a row that disagrees is damaged.
	CallbackURL string
	Fingerprint string // of the pending or approved proposal, "" before policy ran
	Reason      string // why the run failed, ended or needs attention
	Deadline    time.Time
	ParentID    string // set on a fork
	ParentSeq   int64
	LeaseOwner  string
	LeaseUntil  time.Time
	Fence       int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// PrunedAt is when Prune removed the run's bulky records (zero: never).
	// UpdatedAt stays when the run ended.
	PrunedAt time.Time
}

// Checkpoint is an immutable snapshot of a run's State at Seq, hash chained to Seq-1.
type Checkpoint struct {
	RunID         string
	Seq           int64
	SchemaVersion int
	// State is the JSON encoding of State, or, when BaseSeq is set, what
	// changed since the state of checkpoint BaseSeq (see the engine's chain.Resolve).
	State []byte
	// BaseSeq is the seq of an earlier checkpoint of the run that holds a
	// whole state, against which State is written; 0 when State is whole.
	// A run's evidence, messages and proposal are so stored once, in its
	// base, instead of again in every checkpoint.
	BaseSeq   int64
	PrevHash  string
	Hash      string
	CreatedAt time.Time
	// PrunedAt is when Prune removed State (nil since). The row keeps its
	// seq, hashes and seal, so the chain and the audit events naming it
	// still verify; see the engine's chain.Verify for when a pruned checkpoint is allowed.
	PrunedAt time.Time
	Seal
}

// Seal authenticates a stored record: the id of the key that sealed it and
// the record's HMAC under that key (see keyring.Ring). Both are "" on a record
// written before keys were configured.
type Seal struct {
	KeyID string
	MAC   string
}

// IntegrityHead is the store's sealed record of its audit chain: the last
// event (so that deleting the newest events shows) and since when the store
// is keyed (rows older than that may be unsealed; newer ones may not).
type IntegrityHead struct {
	KeyedSince time.Time
	// Seq and Hash are the last event of the global chain (format 1), which
	// ended when the log became chained per run; 0 and "" for a store that
	// never had one sealed.
	Seq  int64
	Hash string
	// AnchorID and AnchorHash are the newest anchor (0 and "" before the
	// first), so that deleting the newest anchors shows.
	AnchorID   int64
	AnchorHash string
	Seal
}

// RequestStatus is where an approval request is.
type RequestStatus string

// The statuses of an approval request.
const (
	RequestPending    RequestStatus = "pending"
	RequestApproved   RequestStatus = "approved"
	RequestRejected   RequestStatus = "rejected"
	RequestExpired    RequestStatus = "expired"
	RequestCancelled  RequestStatus = "cancelled"
	RequestSuperseded RequestStatus = "superseded" // an edit replaced it
)

// ApprovalRequest is what a person is asked to approve: one fingerprint.
type ApprovalRequest struct {
	ID             string
	RunID          string
	Fingerprint    string
	Rule           string
	PolicyRevision string
	Risk           Risk
	Role           string // the lowest role that may approve
	Count          int    // distinct approvers needed
	SelfApproval   bool
	Edit           bool
	RequesterID    string
	Deadline       time.Time
	Status         RequestStatus
	DecidedBy      string
	DecidedAt      time.Time
	Version        int64
	CreatedAt      time.Time
	Seal
}

// MessageLocation is where the message of an approval request was posted.
// It is a record of its own, written once by the delivery that posted the
// message, so that the request row has one writer, the engine, and a
// decision never races a delivery. It is not sealed: it says nothing about
// what was approved (a button carries its run, request and fingerprint, and
// a message is always rendered from its own run), and the delivery that
// writes it need not hold the key.
type MessageLocation struct {
	RequestID string
	RunID     string
	Channel   string
	TS        string // the message's ts, which names it in its channel
	PostedAt  time.Time
}

// Verdict is what one approver said.
type Verdict string

// The verdicts.
const (
	VerdictApprove Verdict = "approve"
	VerdictReject  Verdict = "reject"
)

// Via is the channel a decision came through. It is stored with the decision
// and shown with it; a constant's value never changes.
type Via string

// The channels signoff takes decisions through.
const (
	ViaSlack Via = "slack" // a click or a modal in Slack
	ViaCLI   Via = "cli"   // signoff approve
	ViaAPI   Via = "api"   // POST /v1/runs/{id}/force
	ViaWeb   Via = "web"   // the web console's Run page
	ViaMCP   Via = "mcp"   // the MCP gateway's operator tools (signoff.approvals.*)
)

// Decision is one approver's verdict on one request, stored once per approver.
type Decision struct {
	ID            int64
	RequestID     string
	RunID         string
	ApproverID    string
	ApproverName  string
	Role          string // the approver's role, resolved by the server
	Verdict       Verdict
	Reason        string
	EditedArgs    []byte // JSON of the edited actions' arguments, when the approver edited
	Via           Via
	PayloadDigest string // sha256 of the request body that carried it, when there was one
	At            time.Time
	// OnBehalfOf is who delegated this decision to ApproverID (see
	// Delegation); "" when the approver decided in their own right. Role is
	// then the delegator's, and the quorum counts the decision as theirs.
	OnBehalfOf string
	Seal
}

// OpStatus is where an operation (one action's execution) is.
type OpStatus string

// The statuses of an operation.
const (
	OpPending   OpStatus = "pending"   // intent recorded; the call may or may not have happened
	OpCommitted OpStatus = "committed" // receipt recorded
	OpFailed    OpStatus = "failed"    // the target refused it; nothing happened
	OpUnknown   OpStatus = "unknown"   // the outcome cannot be proven; a person decides
)

// Operation is the ledger row of one action's execution.
type Operation struct {
	Key        string // idempotency key: run id + action index
	RunID      string
	Index      int
	Action     string
	ArgsDigest string
	Status     OpStatus
	Attempts   int
	Receipt    []byte // JSON receipt from the target
	Error      string
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Seal
}

// OutboxKind names what a dispatcher does with an outbox row. The package that
// enqueues and delivers a kind defines its constant (bot.KindPost, callback.Kind);
// the value is stored, so it never changes.
type OutboxKind string

// OutboxMessage is a message to deliver after the transaction that caused it commits.
type OutboxMessage struct {
	ID          int64
	RunID       string
	Kind        OutboxKind
	Payload     []byte
	Attempts    int
	NextAttempt time.Time
	DeliveredAt time.Time // zero until delivered
	LastError   string
	Version     int64
	CreatedAt   time.Time
	// Once is a key the outbox holds at most one message under, delivered
	// or not (a channel's digest of one day): a second message with it is
	// refused, on any replica. "" for none.
	Once string
}

// The formats of an audit event: how its PrevHash is chosen.
const (
	// AuditGlobal: PrevHash is the hash of the event before it by seq, of
	// any run (events written before the log was chained per run).
	AuditGlobal = 1
	// AuditPerRun: PrevHash is the hash of the previous event of the same run
	// ("" for its first), and the run's AuditRunHead names its last event.
	AuditPerRun = 2
)

// AuditEvent is one line of the hash-chained audit log: who did what to which run.
type AuditEvent struct {
	Seq      int64
	Format   int // AuditGlobal or AuditPerRun
	RunID    string
	Actor    string
	Action   Event
	Detail   []byte // JSON
	At       time.Time
	PrevHash string
	Hash     string
	// CheckpointSeq and CheckpointHash name the checkpoint this event's
	// transition wrote (0 and "" for an event without one, such as a
	// refusal), so that verify can match every transition with its event.
	CheckpointSeq  int64
	CheckpointHash string
	Seal
}

// AuditRunHead is the last audit event of one run (RunID "" for the events
// about no run), sealed, so that deleting a run's newest events shows.
type AuditRunHead struct {
	RunID string
	Seq   int64
	Hash  string
	Seal
}

// AuditAnchor is one record of the anchor chain: the run heads that moved
// since the anchor before it, so that the chain up to an anchor commits to
// every event written before it. ID counts from 1.
type AuditAnchor struct {
	ID       int64
	At       time.Time
	Heads    []AnchoredHead
	PrevHash string
	Hash     string
	Seal
}

// AnchoredHead is one run's last event as an anchor recorded it.
type AnchoredHead struct {
	RunID string `json:"run_id"`
	Seq   int64  `json:"seq"`
	Hash  string `json:"hash"`
}

// AnchorHash is the chained hash of an anchor.
func AnchorHash(a *AuditAnchor) string {
	h := newChainHash()
	h.str(a.PrevHash)
	h.int(a.ID)
	h.int(a.At.UnixMilli())
	for _, hd := range a.Heads {
		h.str(hd.RunID)
		h.int(hd.Seq)
		h.str(hd.Hash)
	}
	return h.sum()
}

// AuditHash is the chained hash of an audit event. Drivers call it so that both
// compute the same chain. A per-run event hashes its format too, so that
// passing it off as a global one changes its hash.
func AuditHash(e *AuditEvent) string {
	h := newChainHash()
	if e.Format == AuditPerRun {
		h.buf = append(h.buf, "1:2"...)
	}
	h.str(e.PrevHash)
	h.int(e.Seq)
	h.str(e.RunID)
	h.str(e.Actor)
	h.str(string(e.Action))
	h.bytes(e.Detail)
	h.int(e.At.UnixMilli())
	if e.CheckpointSeq != 0 || e.CheckpointHash != "" || e.Format == AuditPerRun {
		// Only events written since events name their checkpoint hash it, so
		// that every older chain keeps its hashes.
		h.int(e.CheckpointSeq)
		h.str(e.CheckpointHash)
	}
	return h.sum()
}

// CheckpointHash is the chained hash of a checkpoint.
func CheckpointHash(c *Checkpoint) string {
	h := newChainHash()
	h.str(c.PrevHash)
	h.str(c.RunID)
	h.int(c.Seq)
	h.int(int64(c.SchemaVersion))
	h.bytes(c.State)
	h.int(c.CreatedAt.UnixMilli())
	if c.BaseSeq != 0 {
		// Only checkpoints written against a base hash it, so that every
		// older chain keeps its hashes.
		h.int(c.BaseSeq)
	}
	return h.sum()
}

// chainHash writes the parts of a chained hash, each as "<length>:<part>",
// so that no two lists of parts write the same bytes. Small parts gather in
// one buffer, written to the hash when a large one comes (the state and
// the detail go in as they are, not copied) and at the end: each Write to
// a hash.Hash makes its argument escape, and writing each part on its own
// cost three allocations a part.
type chainHash struct {
	h   hash.Hash
	buf []byte
}

func newChainHash() *chainHash { return &chainHash{h: sha256.New(), buf: make([]byte, 0, 256)} }

func (c *chainHash) str(p string) {
	c.buf = append(append(strconv.AppendInt(c.buf, int64(len(p)), 10), ':'), p...)
}

// int is the part written as the decimal text of n.
func (c *chainHash) int(n int64) {
	var d [20]byte
	digits := strconv.AppendInt(d[:0], n, 10)
	c.buf = append(append(strconv.AppendInt(c.buf, int64(len(digits)), 10), ':'), digits...)
}

func (c *chainHash) bytes(p []byte) {
	c.buf = append(strconv.AppendInt(c.buf, int64(len(p)), 10), ':')
	c.flush()
	c.h.Write(p)
}

func (c *chainHash) flush() {
	c.h.Write(c.buf)
	c.buf = c.buf[:0]
}

func (c *chainHash) sum() string {
	c.flush()
	return hex.EncodeToString(c.h.Sum(c.buf[:0]))
}
