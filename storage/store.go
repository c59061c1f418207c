package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// Sentinel errors every storage driver maps its native errors to, in one place.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set changed zero rows because the record moved on.
	ErrConflict = errors.New("conflict: the record was changed by someone else")
	// ErrDuplicate: a unique key (id, idempotency key per requester, approver per request) exists.
	ErrDuplicate = errors.New("duplicate")
	// ErrHeadMoved is the ErrConflict of a write whose events followed a
	// run's audit head known before it (RunWrite.Reserved or Follows)
	// when only that head moved: the records it compare-and-set were as
	// it expected, and events alone were appended to the run since (a
	// refusal). errors.Is(ErrHeadMoved, ErrConflict) holds.
	ErrHeadMoved = fmt.Errorf("%w: the run's audit head moved", ErrConflict)
)

// Store is the durable home of every record. Drivers: storage/sqlite, storage/postgres.
// Both pass the behaviour suite in storage/storagetest.
type Store interface {
	// Update runs fn in one read-write transaction and commits it when fn returns
	// nil. Everything fn writes commits together or not at all.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// View runs fn in a read-only transaction with a consistent snapshot.
	View(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// Close releases the store's resources.
	Close() error
}

// Tx is what a transaction can read and write. A transaction stays usable after
// a method returns ErrDuplicate or ErrNotFound (a driver that aborts on errors
// wraps such statements in savepoints). Records that refer to a missing run or
// request return ErrNotFound. fn must not call Update on the same store. Mutable records carry a Version:
// Update* methods are compare-and-set on it (WHERE version = rec.Version), set the
// stored version to rec.Version+1, bump rec.Version on success, and return
// ErrConflict when zero rows changed. Insert* methods return ErrDuplicate on a
// unique violation. Single-record reads return ErrNotFound. Times are stored with
// millisecond precision in UTC.
type Tx interface {
	// InsertRun stores a new run (Version is set to 1). ErrDuplicate when the id
	// exists, or a non-empty IdempotencyKey of the same RequesterID: a key is
	// its requester's, and two requesters' equal keys are two runs.
	InsertRun(ctx context.Context, r *record.Run) error
	// Run loads one run. ErrNotFound.
	Run(ctx context.Context, id string) (*record.Run, error)
	// LoadRun loads one run with the records of it that parts asks for, as
	// Run and each list method would, in as few round trips as the database
	// allows (PostgreSQL: one). ErrNotFound when the run does not exist.
	LoadRun(ctx context.Context, id string, parts RunParts) (*RunBundle, error)
	// RunByIdempotencyKey loads the run requesterID submitted with key; a run
	// of another requester with the same key is not it. ErrNotFound.
	RunByIdempotencyKey(ctx context.Context, requesterID, key string) (*record.Run, error)
	// ListRuns lists runs, oldest first (created_at, id), after the filter's cursor.
	ListRuns(ctx context.Context, f RunFilter) ([]*record.Run, error)
	// ListRunHeads is ListRuns with each run's latest checkpoint (the one at
	// its Seq; nil when that checkpoint is missing) and that checkpoint's
	// base (at its BaseSeq; nil when it has none), read in one query.
	ListRunHeads(ctx context.Context, f RunFilter) ([]*RunHead, error)
	// UpdateRun is a compare-and-set on r.Version that writes what a run's
	// life changes: status, step, seq, fingerprint, reason, deadline, lease,
	// fence, updated and pruned times. What identifies the run (workflow,
	// task, requester, idempotency key, parent, creation time, callback URL)
	// is InsertRun's alone. ErrConflict, ErrNotFound.
	UpdateRun(ctx context.Context, r *record.Run) error
	// ClaimRuns leases up to limit runs (0 = no limit) in one of statuses whose
	// lease is free (LeaseUntil at or before now): it sets LeaseOwner to owner,
	// LeaseUntil to until, Fence+1 and Version+1, and returns the runs, least
	// recently updated first. Two claimers never get the same run, so several
	// workers (or replicas) can share the work; the version bump fences out the
	// writes of a worker whose lease was taken over.
	ClaimRuns(ctx context.Context, owner string, statuses []record.Status, now, until time.Time, limit int) ([]*record.Run, error)

	// AppendCheckpoint stores an immutable checkpoint. ErrDuplicate when (run, seq) exists.
	AppendCheckpoint(ctx context.Context, c *record.Checkpoint) error
	// SaveRun writes one transition of a run as InsertRun (w.Run.Version 0)
	// or UpdateRun, AppendCheckpoint of w.Checkpoint and then, for each of
	// w's other records that is not nil, InsertRequest, UpdateRequest
	// (Decided), InsertDecision and InsertOperation (Operation.Version 0) or
	// UpdateOperation would, in that order, and returns the first error they
	// would, setting what they set (versions, the decision's id). After an
	// error the transaction is to be given up (returned from fn, so that
	// Update rolls it back): a driver may send the statements together, and
	// those after the one that failed may have run.
	SaveRun(ctx context.Context, w *RunWrite) error
	// Checkpoints lists a run's checkpoints by seq ascending (empty when none).
	Checkpoints(ctx context.Context, runID string) ([]*record.Checkpoint, error)
	// PruneCheckpoints removes the state of a run's checkpoints up to and
	// including seq that still have one (State becomes nil, PrunedAt at),
	// keeping every other column, and says how many it pruned.
	PruneCheckpoints(ctx context.Context, runID string, seq int64, at time.Time) (int, error)

	// EndedRuns lists runs in a terminal status (Status.Terminal) that are not
	// pruned and were last updated before f.Before, by (created_at, id) after
	// the filter's cursor, at most f.Limit (0 = no limit).
	EndedRuns(ctx context.Context, f EndedFilter) ([]*record.Run, error)
	// CountRuns counts the runs in each status (a status without runs is absent).
	CountRuns(ctx context.Context) (map[record.Status]int, error)

	// InsertRequest stores a new approval request (Version is set to 1). ErrDuplicate.
	InsertRequest(ctx context.Context, r *record.ApprovalRequest) error
	// Request loads one approval request. ErrNotFound.
	Request(ctx context.Context, id string) (*record.ApprovalRequest, error)
	// RequestsForRun lists a run's requests, oldest first.
	RequestsForRun(ctx context.Context, runID string) ([]*record.ApprovalRequest, error)
	// UpdateRequest is a compare-and-set on r.Version. ErrConflict, ErrNotFound.
	UpdateRequest(ctx context.Context, r *record.ApprovalRequest) error

	// InsertMessageLocation records where a request's message was posted.
	// ErrDuplicate when its location is recorded already (a message is posted
	// once and stays where it is); ErrNotFound when the request does not exist.
	InsertMessageLocation(ctx context.Context, l *record.MessageLocation) error
	// MessageLocations lists where a run's requests were posted, oldest first
	// (empty when none was).
	MessageLocations(ctx context.Context, runID string) ([]*record.MessageLocation, error)

	// InsertReview stores the follow-up review of a forced approval
	// (Version is set to 1). ErrDuplicate when the run has one already.
	InsertReview(ctx context.Context, r *record.Review) error
	// Review loads a run's review. ErrNotFound.
	Review(ctx context.Context, runID string) (*record.Review, error)
	// Reviews lists the reviews in status, soonest due first.
	Reviews(ctx context.Context, status record.ReviewStatus) ([]*record.Review, error)
	// UpdateReview is a compare-and-set on r.Version. ErrConflict, ErrNotFound.
	UpdateReview(ctx context.Context, r *record.Review) error

	// InsertDecision stores a decision; ErrDuplicate when this approver already
	// decided this request. Sets d.ID.
	InsertDecision(ctx context.Context, d *record.Decision) error
	// Decisions lists a run's decisions in the order they were made.
	Decisions(ctx context.Context, runID string) ([]*record.Decision, error)

	// InsertDelegation stores a new delegation (Version is set to 1).
	// ErrDuplicate when its id exists.
	InsertDelegation(ctx context.Context, d *record.Delegation) error
	// Delegation loads one delegation. ErrNotFound.
	Delegation(ctx context.Context, id string) (*record.Delegation, error)
	// Delegations lists the delegations to one person (every one when to is
	// ""), revoked and ended ones too, oldest first (created_at, id).
	Delegations(ctx context.Context, to string) ([]*record.Delegation, error)
	// UpdateDelegation is a compare-and-set on d.Version. ErrConflict, ErrNotFound.
	UpdateDelegation(ctx context.Context, d *record.Delegation) error

	// InsertOperation records an intent (Version is set to 1). ErrDuplicate when the key exists.
	InsertOperation(ctx context.Context, op *record.Operation) error
	// Operation loads one operation by idempotency key. ErrNotFound.
	Operation(ctx context.Context, key string) (*record.Operation, error)
	// Operations lists a run's operations by action index.
	Operations(ctx context.Context, runID string) ([]*record.Operation, error)
	// UpdateOperation is a compare-and-set on op.Version. ErrConflict, ErrNotFound.
	UpdateOperation(ctx context.Context, op *record.Operation) error

	// EnqueueOutbox stores a message to deliver (Version is set to 1). Sets m.ID.
	// A message whose Once key another message holds is ErrDuplicate.
	EnqueueOutbox(ctx context.Context, m *record.OutboxMessage) error
	// DueOutbox lists undelivered messages whose NextAttempt is at or before now,
	// in enqueue order (by id), at most limit (0 = no limit).
	DueOutbox(ctx context.Context, now time.Time, limit int) ([]*record.OutboxMessage, error)
	// ListOutbox lists undelivered messages that pass f, in enqueue order (by
	// id), at most f.Limit (0 = no limit).
	ListOutbox(ctx context.Context, f OutboxFilter) ([]*record.OutboxMessage, error)
	// UpdateOutbox is a compare-and-set on m.Version. ErrConflict, ErrNotFound.
	UpdateOutbox(ctx context.Context, m *record.OutboxMessage) error
	// OutboxForRun lists a run's messages, delivered or not, in enqueue order.
	OutboxForRun(ctx context.Context, runID string) ([]*record.OutboxMessage, error)
	// DeleteDeliveredOutbox deletes a run's delivered messages and says how many.
	DeleteDeliveredOutbox(ctx context.Context, runID string) (int, error)

	// AppendAudit appends to the audit chain of e.RunID: the driver sets
	// e.Format to AuditPerRun, e.Seq to a seq larger than every committed
	// one (unique; a rolled-back append may leave a gap), e.PrevHash to the
	// hash of the run's last event (its AuditRunHead; "" for the first), and
	// e.Hash to AuditHash(e); then, when seal is not nil, e.Seal and the
	// head's seal to seal(e, head), and stores the event and moves the run's
	// head to it. Only appends to the same run wait for each other.
	AppendAudit(ctx context.Context, e *record.AuditEvent, seal func(*record.AuditEvent, *record.AuditRunHead) (event, head record.Seal)) error
	// AuditEvents lists audit events by seq ascending after f.AfterSeq, for one run
	// when f.RunID is set, at most f.Limit (0 = no limit).
	AuditEvents(ctx context.Context, f AuditFilter) ([]*record.AuditEvent, error)
	// AuditRunHead loads the head of one run's audit chain. ErrNotFound.
	AuditRunHead(ctx context.Context, runID string) (*record.AuditRunHead, error)
	// AuditRunHeads lists the heads of every run's audit chain, by run id.
	AuditRunHeads(ctx context.Context) ([]*record.AuditRunHead, error)

	// LatestAnchor loads the newest anchor (ErrNotFound before the first). In
	// Update it also holds the anchor chain until the transaction ends, so
	// that anchor writers take turns.
	LatestAnchor(ctx context.Context) (*record.AuditAnchor, error)
	// AnchorHeads marks the run heads that moved since they were last
	// anchored as anchored and returns them, by run id.
	AnchorHeads(ctx context.Context) ([]record.AnchoredHead, error)
	// InsertAnchor stores an anchor. ErrDuplicate when its id exists.
	InsertAnchor(ctx context.Context, a *record.AuditAnchor) error
	// AuditAnchors lists every anchor by id.
	AuditAnchors(ctx context.Context) ([]*record.AuditAnchor, error)

	// IntegrityHead reads the store's sealed head: since when it is keyed,
	// the end of the global chain, the newest anchor. ErrNotFound when the
	// store was never keyed.
	IntegrityHead(ctx context.Context) (*record.IntegrityHead, error)
	// PutIntegrityHead writes the store's sealed head (there is one).
	PutIntegrityHead(ctx context.Context, h *record.IntegrityHead) error
	// ClaimRequest stores r (Version is set to 1) unless a request with its
	// Digest is stored; claimed says which. first is the stored one: r, or the
	// copy that came first, answered or not. Two claimers of one digest, on any
	// replicas, never both claim it.
	ClaimRequest(ctx context.Context, r *record.SeenRequest) (first *record.SeenRequest, claimed bool, err error)
	// SeenRequest loads one claimed request. ErrNotFound.
	SeenRequest(ctx context.Context, digest string) (*record.SeenRequest, error)
	// AnswerRequest records r's answer (AnsweredAt, Status, ContentType, Body)
	// as a compare-and-set on r.Version. ErrConflict, ErrNotFound.
	AnswerRequest(ctx context.Context, r *record.SeenRequest) error
	// ForgetRequests deletes up to limit (0 = no limit) requests whose
	// ExpiresAt is at or before now, soonest expired first, and says how many
	// it deleted.
	ForgetRequests(ctx context.Context, now time.Time, limit int) (int, error)
}

// RunParts says which of a run's records LoadRun reads beside its row.
type RunParts struct {
	Checkpoints bool
	Requests    bool
	Decisions   bool
	Operations  bool
	// Messages reads where the run's requests were posted (MessageLocations).
	Messages bool
	// Audit reads the run's audit events and its audit head.
	Audit bool
	// Outbox reads the run's outbox messages, delivered or not
	// (OutboxForRun).
	Outbox bool
	// Reserve reads the run's audit head with seqs taken for its next
	// events, for a write of the run after the read (RunWrite.Reserved). A
	// driver whose audit append would cost a round trip of its own
	// (PostgreSQL) fills RunBundle.Reserved; the others leave it nil.
	Reserve bool
}

// AuditReservation is a run's audit head as a read saw it (Hash, "" before
// the run's first event), with two seqs taken then for the run's next
// events (Seq, and Spare larger). A write that names it (RunWrite.Reserved)
// appends its events after that head without reading the head again, and
// fails with ErrConflict if the head moved since. An unused seq is a gap:
// seqs are not gap-free.
type AuditReservation struct {
	RunID      string
	Hash       string
	Seq, Spare int64
}

// RunBundle is a run and the records of it that RunParts asked for, each
// list in the order its own method gives (nil when not asked for or empty).
type RunBundle struct {
	Run         *record.Run
	Checkpoints []*record.Checkpoint
	Requests    []*record.ApprovalRequest
	Decisions   []*record.Decision
	Operations  []*record.Operation
	Messages    []*record.MessageLocation
	Audit       []*record.AuditEvent
	// AuditHead is the run's audit head (nil when it has none).
	AuditHead *record.AuditRunHead
	Outbox    []*record.OutboxMessage
	// Reserved is the run's audit head with seqs taken for its next events
	// (RunParts.Reserve), nil when the driver takes none.
	Reserved *AuditReservation
}

// RunWrite is what one transition of a run writes (see Tx.SaveRun): the
// records a transition changes beside its run travel with it, so that a
// driver whose every statement is a round trip sends them in one.
type RunWrite struct {
	Run        *record.Run
	Checkpoint *record.Checkpoint
	// Request is a new approval request (nil: none).
	Request *record.ApprovalRequest
	// Decided is an approval request the transition decides or moves on,
	// compare-and-set on its Version (nil: none).
	Decided *record.ApprovalRequest
	// Decision is a person's decision the transition records (nil: none).
	Decision *record.Decision
	// Operation is an intent the transition records (Version 0) or an
	// operation it moves on, compare-and-set on its Version (nil: none).
	Operation *record.Operation
	// Reserved, when not nil, is the run's audit head as a read before the
	// transaction saw it (RunBundle.Reserved): the transition's events
	// follow it. A driver may then send the transition's writes and events
	// with COMMIT instead of in a round trip of their own: a compare-and-set
	// they lose, or a head that moved since, then fails the Update with
	// ErrConflict rather than SaveRun, and nothing of the transaction is
	// stored; and Decision.ID is not known after it (0).
	Reserved *AuditReservation
	// Follows, when not nil and Reserved is, is the run's audit head as
	// the last write of the run that this process committed left it (its
	// last event): a driver that keeps seqs taken ahead (PostgreSQL) may
	// then append the transition's events after it with those seqs, and
	// send everything with COMMIT, as after a reservation, with a head
	// that moved since failing the Update with ErrHeadMoved. Another
	// driver reads the head inside the transaction and chains the events
	// after it.
	Follows *record.AuditRunHead
	// Events are the transition's audit events of Run, in order, each
	// appended after the records above as AppendAudit appends it (with
	// Seal as its seal), so that a driver may store them with the
	// transition's own rows.
	Events []*record.AuditEvent
	Seal   func(*record.AuditEvent, *record.AuditRunHead) (event, head record.Seal)
}

// RunHead is a run and its latest checkpoint (nil when it is missing).
type RunHead struct {
	Run  *record.Run
	Head *record.Checkpoint
	// Base is the checkpoint Head's state is written against (Head.BaseSeq),
	// nil when Head holds a whole state or that checkpoint is missing.
	Base *record.Checkpoint
}

// RunFilter selects runs for ListRuns.
type RunFilter struct {
	// Statuses keeps runs in any of these statuses; empty keeps all.
	Statuses []record.Status
	// TaskID and RequesterID, when set, keep the runs of that task and of
	// that requester.
	TaskID      string
	RequesterID string
	// Rule, when set, keeps runs with an approval request under that rule.
	Rule string
	// Text, when set, keeps runs whose id, task, requester or the rule of
	// one of their requests holds it (ASCII letters in any case): what
	// identifies a run, never what an agent wrote in its arguments.
	Text string
	// DeadlineBefore keeps runs with a non-zero Deadline before this time.
	DeadlineBefore time.Time
	// After is the cursor: runs strictly after (CreatedAt, ID) of this run.
	AfterCreated time.Time
	AfterID      string
	// Limit caps the result; 0 means no limit.
	Limit int
}

// EndedFilter selects runs for EndedRuns.
type EndedFilter struct {
	// Before keeps runs whose UpdatedAt (when they ended) is before it.
	Before time.Time
	// The cursor: runs strictly after (CreatedAt, ID) of this run.
	AfterCreated time.Time
	AfterID      string
	Limit        int
}

// OutboxFilter selects undelivered outbox messages for ListOutbox.
type OutboxFilter struct {
	// Kinds keeps messages of these kinds; empty keeps all.
	Kinds []record.OutboxKind
	// RunID keeps one run's messages; "" keeps all.
	RunID string
	// DueBy keeps messages whose NextAttempt is at or before it; zero keeps all.
	DueBy time.Time
	// Failing keeps messages whose last attempt failed (LastError set).
	Failing bool
	// Heads keeps only the oldest undelivered message of each run among the
	// kinds selected, before the other conditions: a queue that delivers
	// each run's messages in order reads only what it may send next.
	Heads bool
	// AfterID is the cursor: messages with a larger id.
	AfterID int64
	Limit   int
}

// AuditFilter selects audit events.
type AuditFilter struct {
	RunID    string
	AfterSeq int64
	Limit    int
	// Newest lists by seq descending instead: with Limit 1, the head of the
	// log without reading the rest.
	Newest bool
}
