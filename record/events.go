package record

// Event names a transition of a run, or an audit event without one (a
// refusal). It is the action of the run's audit event and what hooks match
// on, so a name is stored: a constant's value never changes.
type Event string

// The events the engine records.
const (
	EventStarted            Event = "started"             // an agent's run began
	EventStep               Event = "step"                // an agent's step completed
	EventStepFailed         Event = "step_failed"         // an agent's step failed and will be retried
	EventSubmitted          Event = "submitted"           // a proposal was submitted and gated
	EventProposed           Event = "proposed"            // an agent's run proposed its actions and was gated
	EventDecided            Event = "decided"             // an approver approved or rejected
	EventEdited             Event = "edited"              // an approver changed the arguments (and approved them)
	EventReassigned         Event = "reassigned"          // a pending request got an assignee
	EventExtended           Event = "extended"            // a pending request's deadline moved
	EventCancelled          Event = "cancelled"           // a waiting run was cancelled
	EventExpired            Event = "expired"             // a waiting run's deadline passed
	EventIntent             Event = "intent"              // an operation is about to be called
	EventExecuted           Event = "executed"            // an operation's receipt came from the call
	EventReconciled         Event = "reconciled"          // an operation's receipt came from the target's register
	EventFinished           Event = "finished"            // every operation of a run has its receipt, or there were none
	EventFailed             Event = "failed"              // the run failed
	EventNeedsAttention     Event = "needs_attention"     // the run waits for a person to look at it
	EventForked             Event = "forked"              // a run was copied from another's checkpoint
	EventPruned             Event = "pruned"              // an ended run's bulky records were removed
	EventRefused            Event = "refused"             // a request was refused; nothing else changed
	EventResolved           Event = "resolved"            // a person resolved a run that needed attention
	EventReminded           Event = "reminded"            // the people who may still decide were reminded before the deadline
	EventEscalated          Event = "escalated"           // who may decide the pending request was widened, its deadline maybe extended
	EventPolicyBypassed     Event = "policy_bypassed"     // a break-glass role forced the approval with a justification
	EventReviewAcknowledged Event = "review_acknowledged" // the follow-up review of a forced approval was acknowledged
	EventScheduled          Event = "scheduled"           // an approved run waits for its execution window to open
	EventReleased           Event = "released"            // a scheduled run's window opened: it executes
	// EventApprovalUnconfirmed: an approval of a step-up rule came from
	// elsewhere than the web console; it waits for its confirmation there.
	EventApprovalUnconfirmed Event = "approval_unconfirmed"
)

// The events of delegations (see Delegation), audited with no run.
const (
	EventDelegated         Event = "delegated"          // someone may decide on another's behalf until a time
	EventDelegationRevoked Event = "delegation_revoked" // a delegation was revoked before its end
)

// Events lists every event, so that a name read back can be checked.
var Events = []Event{
	EventStarted, EventStep, EventStepFailed, EventSubmitted, EventProposed,
	EventDecided, EventEdited, EventReassigned, EventExtended, EventCancelled,
	EventExpired, EventIntent, EventExecuted, EventReconciled, EventFinished,
	EventFailed, EventNeedsAttention, EventForked, EventPruned, EventRefused,
	EventResolved, EventReminded, EventEscalated, EventScheduled, EventReleased,
	EventPolicyBypassed, EventReviewAcknowledged, EventApprovalUnconfirmed,
	EventDelegated, EventDelegationRevoked,
}

// Valid reports whether e is one of Events.
func (e Event) Valid() bool {
	for _, v := range Events {
		if e == v {
			return true
		}
	}
	return false
}
