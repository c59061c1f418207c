package record

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the version of State this build writes. A checkpoint with a
// newer version is refused rather than guessed at.
//
// Version 2 checkpoints may be written against a base (Checkpoint.BaseSeq);
// version 1 checkpoints always hold their whole state. The whole state is
// encoded the same in both.
const SchemaVersion = 2

// State is everything a run needs to continue in a new process. It is what a
// checkpoint stores, and it is decoded strictly.
type State struct {
	SchemaVersion int        `json:"schema_version"`
	RunID         string     `json:"run_id"`
	Workflow      string     `json:"workflow"`
	TaskID        string     `json:"task_id,omitempty"`
	Status        Status     `json:"status"`
	Step          int        `json:"step"`
	Requester     Person     `json:"requester"`
	Summary       string     `json:"summary,omitempty"`
	Messages      []Message  `json:"messages,omitempty"`
	Evidence      []Evidence `json:"evidence,omitempty"`
	ModelCalls    int        `json:"model_calls"`
	// StepFailures counts the failures in a row of the next step.
	StepFailures int `json:"step_failures,omitempty"`
	// Proposed is set when the steps are finished and Actions is the proposal.
	Proposed   bool              `json:"proposed,omitempty"`
	Actions    []Action          `json:"actions,omitempty"`
	Checks     []Check           `json:"checks,omitempty"`
	Gate       *Gate             `json:"gate,omitempty"`
	Decisions  []DecisionRecord  `json:"decisions,omitempty"`
	Operations []OperationRecord `json:"operations,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	ForkedFrom *ForkRef          `json:"forked_from,omitempty"`
	// CallbackURL is the proposal's callback_url, sealed with every checkpoint
	// so that the URL events go to cannot be changed in the store unseen.
	CallbackURL string `json:"callback_url,omitempty"`
	// Pruned is set on the checkpoint Prune writes last: what it removed and
	// when. Sealed like every checkpoint, it is what allows the checkpoints
	// before it to have lost their state (see the engine's chain.Verify).
	Pruned *PruneRecord `json:"pruned,omitempty"`
	// Resolutions are what people found of the run while it needed
	// attention (see Engine.Resolve), oldest first.
	Resolutions []ResolutionRecord `json:"resolutions,omitempty"`
	// Reminders are the reminders of the pending request, one per offset of
	// the gate's Remind handled (sent, or passed while a later one was sent),
	// oldest first. Omitted when empty, so states written before it read and
	// seal the same.
	Reminders []ReminderRecord `json:"reminders,omitempty"`
	// Escalations are the escalation steps of the gate's Escalate applied to
	// the pending request, one per step, oldest first. Omitted when empty.
	Escalations []EscalationRecord `json:"escalations,omitempty"`
	// Unconfirmed are the approvals of a step-up rule given elsewhere than
	// the web console: recorded, not counted, until the same person
	// confirms on the run's page. Omitted when empty.
	Unconfirmed []DecisionRecord `json:"unconfirmed,omitempty"`
	// ScheduledFor is when a scheduled run's execution window opens (see
	// Gate.Window): no worker claims it before. Omitted when not scheduled.
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	// Forced is set when the request was approved by break-glass rather
	// than by its quorum. Omitted when empty.
	Forced *ForceRecord `json:"forced,omitempty"`
}

// EscalationRecord is one step of a gate's Escalate, applied once per
// request: from At, people of Role or above and the Users may decide too,
// and the deadline moved by Extended (to Deadline) when the step extends.
type EscalationRecord struct {
	RequestID string     `json:"request_id"`
	Step      int        `json:"step"` // index in the gate's Escalate
	At        time.Time  `json:"at"`
	Role      string     `json:"role,omitempty"`
	Users     []string   `json:"users,omitempty"`
	Extended  Seconds    `json:"extended_seconds,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"` // the deadline after the step
	// Deputies are the delegates of Users when the step was applied, told
	// with them; they decide on their delegator's behalf, as any delegate.
	Deputies []Deputy `json:"deputies,omitempty"`
}

// EscalationStep is one step of a rule's escalate: After the request was
// made, people of Role or above, or the Users, may decide as well; Extend,
// when set, moves the deadline that much later.
type EscalationStep struct {
	After  Seconds  `json:"after_seconds"`
	Role   string   `json:"role,omitempty"`
	Users  []string `json:"users,omitempty"`
	Extend Seconds  `json:"extend_seconds,omitempty"`
}

// ReminderRecord is one offset of a gate's Remind, handled once per request: the
// reminder sent for it (Mention, who was asked), or Passed when it fell due
// with a later offset and only the later one was sent.
type ReminderRecord struct {
	RequestID string    `json:"request_id"`     // the request it reminded of
	Before    Seconds   `json:"before_seconds"` // the offset: this long before the deadline
	At        time.Time `json:"at"`
	Mention   []string  `json:"mention,omitempty"`
	Passed    bool      `json:"passed,omitempty"`
}

// ResolutionRecord is a person's resolution of a run that needed attention.
type ResolutionRecord struct {
	By     string     `json:"by"`
	Choice Resolution `json:"choice"`
	Reason string     `json:"reason"`
	Key    string     `json:"key,omitempty"` // the operation resolved, if any
	Via    string     `json:"via,omitempty"`
	At     time.Time  `json:"at"`
}

// PruneRecord is what Prune removed of an ended run, and when. What was kept:
// the run row, this last checkpoint (the proposal, the gate, the decisions and
// the operations as the run ended, without its evidence and agent messages),
// every checkpoint's seq, hashes and seal, the approval requests, decisions,
// operations and audit events.
type PruneRecord struct {
	At time.Time `json:"at"`
	// ThroughSeq: checkpoints 1 to ThroughSeq lost their state.
	ThroughSeq int64 `json:"through_seq"`
	// StateBytes is the size of the states removed.
	StateBytes int64 `json:"state_bytes"`
	// Evidence and Messages count what the kept state no longer holds.
	Evidence int `json:"evidence,omitempty"`
	Messages int `json:"messages,omitempty"`
	// Outbox counts the delivered outbox messages deleted, of every kind
	// (Slack messages and callbacks); OutboxKinds says how many of each
	// (records written before it was kept have none).
	Outbox      int                `json:"outbox,omitempty"`
	OutboxKinds map[OutboxKind]int `json:"outbox_kinds,omitempty"`
}

// Message is one turn of an agent's working context.
type Message struct {
	Role    string          `json:"role"` // user, assistant, tool
	Content string          `json:"content,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// Check is the result of one read-only check of one action.
type Check struct {
	Action   int    `json:"action"`
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
}

// Gate is what policy decided for the proposal.
type Gate struct {
	Rule           string        `json:"rule"`
	Risk           Risk          `json:"risk"`
	PolicyRevision string        `json:"policy_revision"`
	Approval       *ApprovalSpec `json:"approval,omitempty"`
	Fingerprint    string        `json:"fingerprint"`
	RequestID      string        `json:"request_id,omitempty"`
	Deadline       *time.Time    `json:"deadline,omitempty"`
	// Assignee, when set, is the one person asked to decide; others of a higher
	// role than the rule needs may still decide.
	Assignee string `json:"assignee,omitempty"`
	// Notify are the Slack channels and users the matching rules name to
	// hear the run's outcome without being asked to decide (their notify:
	// lists, merged in order). Omitted when empty, so gates written before
	// it read and seal the same.
	Notify []string `json:"notify,omitempty"`
	// Remind are how long before the deadline the people who may still
	// decide are reminded (the matching rules' remind: lists, merged, longest
	// first). Not part of the fingerprint; omitted when empty.
	Remind []Seconds `json:"remind,omitempty"`
	// Escalate are the steps widening who may decide as time passes (the
	// first matching rule's escalate:, in order of After). Not part of the
	// fingerprint; omitted when empty.
	Escalate []EscalationStep `json:"escalate,omitempty"`
	// Window is when the approved actions may run (the first matching
	// rule's window:, nil for any time). Not part of the fingerprint;
	// omitted when nil.
	Window *Window `json:"window,omitempty"`
	// BreakGlass, when set, lets its role force the approval (see
	// BreakGlass). Not part of the fingerprint; omitted when empty.
	BreakGlass *BreakGlass `json:"break_glass,omitempty"`
}

// ApprovalSpec is what a policy rule requires before its actions run.
type ApprovalSpec struct {
	Role         string  `json:"role"`
	Count        int     `json:"count"`
	Expires      Seconds `json:"expires_seconds"`
	SelfApproval bool    `json:"self_approval"`
	Edit         bool    `json:"edit"`
	// Requirement, when set, is a composite requirement (see Requirement);
	// Role and Count are then its lowest role and the fewest approvals that
	// can meet it. Omitted when unset, so gates written before it read and
	// seal the same.
	Requirement *Requirement `json:"requirement,omitempty"`
	// StepUp, when positive, is how recent the sign-in of an approver must
	// be: an approval counts only when given on the web console by someone
	// who signed in at most this long before (a rule's confirm: web or
	// step_up). Omitted when zero, so gates written before it read and seal
	// the same.
	StepUp Seconds `json:"step_up_seconds,omitempty"`
}

// Seconds is a duration stored as whole seconds, so checkpoints stay plain JSON.
type Seconds int64

// Duration converts s to a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) * time.Second }

// DecisionRecord is a decision as the checkpoint remembers it.
type DecisionRecord struct {
	RequestID string    `json:"request_id"`
	By        string    `json:"by"`
	Role      string    `json:"role"`
	Verdict   Verdict   `json:"verdict"`
	Reason    string    `json:"reason,omitempty"`
	Edited    bool      `json:"edited,omitempty"`
	Via       Via       `json:"via"`
	At        time.Time `json:"at"`
	// OnBehalfOf is Decision.OnBehalfOf.
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
}

// OperationRecord is an operation as the checkpoint remembers it.
type OperationRecord struct {
	Key      string          `json:"key"`
	Index    int             `json:"index"`
	Action   string          `json:"action"`
	Status   OpStatus        `json:"status"`
	Attempts int             `json:"attempts"`
	Receipt  json.RawMessage `json:"receipt,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Intended is when the intent was recorded and ArgsDigest the digest
	// of the arguments it sends, set on a pending operation whose intent
	// this checkpoint alone holds: its Operation row is written with its
	// first outcome or counted retry (and then wins).
	Intended   *time.Time `json:"intended,omitempty"`
	ArgsDigest string     `json:"args_digest,omitempty"`
}

// ForkRef names the checkpoint a run was forked from.
type ForkRef struct {
	RunID string `json:"run_id"`
	Seq   int64  `json:"seq"`
}
