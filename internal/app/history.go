package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// historyEvents are a run's audit events by the checkpoint each names: what
// each transition did, as the engine recorded it when it wrote the
// checkpoint (a receipt and the run's end share one).
func historyEvents(evs []*record.AuditEvent) map[int64][]*record.AuditEvent {
	by := map[int64][]*record.AuditEvent{}
	for _, e := range evs {
		if e.CheckpointSeq > 0 {
			by[e.CheckpointSeq] = append(by[e.CheckpointSeq], e)
		}
	}
	return by
}

// renderHistory prints a run's checkpoints, each with what it recorded: the
// audit events that name it (historyEvents).
func renderHistory(w io.Writer, hist []workflow.HistoryEntry, events map[int64][]*record.AuditEvent, find specFinder) {
	var buf bytes.Buffer
	defer func() {
		// tabwriter pads the empty PROBLEM cell of every healthy checkpoint.
		for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}()
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tSTATUS\tSTEP\tWHAT\tHASH\tPROBLEM")
	var prev *record.State
	for _, h := range hist {
		status, step, what := "?", "?", "?"
		switch {
		case h.State == nil && h.Pruned != nil:
			status, step, what = "-", "-", "pruned on "+h.Pruned.UTC().Format(time.DateOnly)
		case h.State != nil:
			status, step, what = term(string(h.State.Status)), fmt.Sprint(h.State.Step), term(historyWhat(events[h.Seq], h.State, prev, find))
			prev = h.State
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Seq, h.At.Format(time.RFC3339), status, step, what, term(policy.ShortFingerprint(h.Hash)), term(h.Problem))
	}
	tw.Flush()
}

// historyWhat says what a checkpoint recorded, from the audit events that
// name it, with the run's new status when it changed. The events say what
// happened and who did it; the state the checkpoint wrote (st) adds what
// they do not record: which action an operation is and its attempts so far,
// whether an editor's approval followed the edit, and, with the state
// before (prev), the fields an edit changed. A checkpoint no event names (a
// store written before events named their checkpoints, or a damaged log,
// which verify reports) says "?".
func historyWhat(evs []*record.AuditEvent, st, prev *record.State, find specFinder) string {
	if len(evs) == 0 {
		return "?"
	}
	var what []string
	for _, ev := range evs {
		var d eventDetail
		_ = json.Unmarshal(ev.Detail, &d) // a detail that does not read says nothing more
		what = append(what, eventWhat(historyEvent{ev: ev, d: d, st: st, prev: prev, find: find})...)
	}
	if prev != nil && st.Status != prev.Status {
		what = append(what, string(st.Status))
	}
	if len(what) == 0 {
		return "-"
	}
	return strings.Join(what, "; ")
}

// eventDetail is what historyWhat reads of an audit event's detail; each
// event has some of these (see where the engine records it).
type eventDetail struct {
	Step       int               `json:"step"`
	Failures   int               `json:"failures"`
	Verdict    record.Verdict    `json:"verdict"`
	To         string            `json:"to"`
	Deadline   string            `json:"deadline"`
	Key        string            `json:"key"`
	Choice     record.Resolution `json:"choice"`
	FromRun    string            `json:"from_run"`
	FromSeq    int64             `json:"from_seq"`
	ThroughSeq int64             `json:"through_seq"`
	Before     string            `json:"before"`
	Mention    string            `json:"mention"`
	Steps      string            `json:"steps"`
	Roles      string            `json:"roles"`
	Users      string            `json:"users"`
	At         string            `json:"at"`
	Window     string            `json:"window"`
	OnBehalfOf string            `json:"on_behalf_of"`
	Role       string            `json:"role"`
	ReviewRole string            `json:"review_role"`
	ReviewDue  string            `json:"review_due"`
	Via        string            `json:"via"`
	MaxAge     string            `json:"max_age"`
}

// historyEvent is one event of a checkpoint, with its detail, the state the
// checkpoint wrote and the one before it (nil for none).
type historyEvent struct {
	ev       *record.AuditEvent
	d        eventDetail
	st, prev *record.State
	find     specFinder
}

// eventWhat says what one event recorded; an event that only moves the
// run's status (finished, failed, cancelled, expired, a run put in
// needs_attention) says nothing of its own but on the run's first
// checkpoint, where it is the outcome of the submission.
func eventWhat(h historyEvent) []string {
	if say, ok := eventSays[h.ev.Action]; ok {
		return say(h)
	}
	return outcomeWhat(h)
}

// outcomeWhat is what an event that only moves the run's status says: the
// submission on the run's first checkpoint, else nothing.
func outcomeWhat(h historyEvent) []string {
	if h.ev.CheckpointSeq == 1 {
		return []string{"submitted; " + string(h.st.Status)}
	}
	return nil
}

// eventSays says what each kind of event recorded (see eventWhat).
var eventSays = map[record.Event]func(h historyEvent) []string{
	record.EventStarted: func(historyEvent) []string { return []string{"started"} },
	record.EventForked: func(h historyEvent) []string {
		return []string{fmt.Sprintf("forked from %s at %d", h.d.FromRun, h.d.FromSeq)}
	},
	record.EventSubmitted: func(h historyEvent) []string { return []string{"submitted; " + string(h.st.Status)} },
	record.EventPruned: func(h historyEvent) []string {
		// The checkpoints before it lost their state: this is no start.
		return []string{fmt.Sprintf("summary written by the prune of 1-%d; %s", h.d.ThroughSeq, h.st.Status)}
	},
	record.EventStep: func(h historyEvent) []string { return []string{fmt.Sprintf("step %d", h.d.Step)} },
	record.EventStepFailed: func(h historyEvent) []string {
		return []string{fmt.Sprintf("step %d failed (%d in a row)", h.d.Step, h.d.Failures)}
	},
	record.EventProposed: func(historyEvent) []string { return []string{"proposed"} },
	record.EventDecided: func(h historyEvent) []string {
		by := h.ev.Actor
		if h.d.OnBehalfOf != "" {
			by += " on behalf of " + h.d.OnBehalfOf
		}
		if h.d.Verdict == record.VerdictReject {
			return []string{"rejected by " + by}
		}
		return []string{"approved by " + by}
	},
	record.EventPolicyBypassed: func(h historyEvent) []string {
		return []string{"approval forced by " + h.ev.Actor + " (" + h.d.Role + "), bypassing the quorum; review by " + h.d.ReviewRole + " due " + h.d.ReviewDue}
	},
	record.EventReviewAcknowledged: func(h historyEvent) []string {
		return []string{"review of the forced approval acknowledged by " + h.ev.Actor}
	},
	record.EventEdited:     editWhat,
	record.EventReassigned: func(h historyEvent) []string { return []string{"reassigned to " + h.d.To} },
	record.EventExtended:   func(h historyEvent) []string { return []string{"deadline moved to " + h.d.Deadline} },
	record.EventIntent:     func(h historyEvent) []string { return []string{"intent: " + operationName(h.st, h.d.Key)} },
	record.EventExecuted:   operationWhat,
	record.EventReconciled: operationWhat,
	record.EventNeedsAttention: func(h historyEvent) []string {
		if h.d.Key == "" {
			return outcomeWhat(h)
		}
		return operationWhat(h)
	},
	record.EventReminded: func(h historyEvent) []string {
		who := "nobody left to mention"
		if h.d.Mention != "" {
			who = "mentioning " + strings.ReplaceAll(h.d.Mention, ",", ", ")
		}
		return []string{"reminded " + h.d.Before + " before the deadline, " + who}
	},
	record.EventEscalated: func(h historyEvent) []string {
		var who []string
		if h.d.Roles != "" {
			who = append(who, strings.ReplaceAll(h.d.Roles, ",", " or above, ")+" or above")
		}
		if h.d.Users != "" {
			who = append(who, strings.ReplaceAll(h.d.Users, ",", ", "))
		}
		return []string{"escalated (step " + h.d.Steps + "): " + strings.Join(who, ", ") + " may decide too; the deadline is " + h.d.Deadline}
	},
	record.EventScheduled: func(h historyEvent) []string {
		return []string{"outside its window " + h.d.Window + ": runs at " + h.d.At}
	},
	record.EventReleased: func(historyEvent) []string { return []string{"window open: released"} },
	record.EventApprovalUnconfirmed: func(h historyEvent) []string {
		return []string{"approved by " + h.ev.Actor + " via " + h.d.Via + ": not counted until confirmed on the web console (a sign-in within " + h.d.MaxAge + ")"}
	},
	record.EventResolved: func(h historyEvent) []string {
		what := []string{"resolved by " + h.ev.Actor + ": " + h.d.Choice.Describe()}
		if h.d.Key != "" {
			what = append(operationWhat(h), what...)
		}
		return what
	},
}

// editWhat names an approver's edit and the fields it changed (the state
// before against the edit's own: the event records only the new
// arguments), and the editor's approval of them when one was recorded with
// it (the last decision of the edit's state).
func editWhat(h historyEvent) []string {
	by := h.ev.Actor
	edit := "edited by " + by
	if h.prev != nil {
		edit += ": " + changesText(policy.ChangedFields(h.prev.Actions, h.st.Actions), h.st.Actions, h.find)
	}
	what := []string{edit}
	if n := len(h.st.Decisions); n > 0 {
		if d := h.st.Decisions[n-1]; d.By == by && !d.Edited && d.Verdict == record.VerdictApprove {
			what = append(what, "approved by "+by)
		}
	}
	return what
}

// operationWhat says what became of the operation an event names, as the
// checkpoint's state holds it: its receipt, or its status, and the attempts
// it took.
func operationWhat(h historyEvent) []string {
	op := operationOf(h.st, h.d.Key)
	if op == nil {
		return []string{"operation " + h.d.Key}
	}
	name := operationName(h.st, h.d.Key)
	if op.Status == record.OpCommitted {
		return []string{fmt.Sprintf("receipt: %s after %s", name, attempts(op.Attempts))}
	}
	return []string{fmt.Sprintf("%s: %s after %s", op.Status, name, attempts(op.Attempts))}
}

// operationName names the operation key is the key of: its action's number
// and name.
func operationName(st *record.State, key string) string {
	op := operationOf(st, key)
	if op == nil {
		return "operation " + key
	}
	return fmt.Sprintf("action %d (%s)", op.Index+1, op.Action)
}

func operationOf(st *record.State, key string) *record.OperationRecord {
	for i := range st.Operations {
		if st.Operations[i].Key == key {
			return &st.Operations[i]
		}
	}
	return nil
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
