package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// term is how every renderer of this file shows text that came from data (a
// run, a proposal, a target's answer) on a terminal: one line, with control,
// bidi and zero-width characters escaped and visible, so that nothing an agent
// wrote can move the cursor, erase what signoff printed or add a line of its
// own. JSON output never goes through it.
func term(s string) string { return show.Inert(s) }

// termLines is term for a message of several lines that signoff composed (an
// error): its own line breaks stay, every line is inert.
func termLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = term(l)
	}
	return strings.Join(lines, "\n")
}

// argsShown is how a terminal shows an action's arguments: with the fields
// its config lists under redact: replaced by "[redacted]", as Slack shows
// them to approvers. JSON output carries the stored arguments unchanged.
type argsShown func(action string, args json.RawMessage) string

// redactor shows arguments through the actions' specs. Like Slack, it fails
// closed: an action the config does not declare, or arguments that cannot be
// read, are hidden whole.
func redactor(find func(string) (*workflow.ActionSpec, bool)) argsShown {
	return func(action string, args json.RawMessage) string {
		spec, ok := find(action)
		if !ok {
			return "(arguments hidden: the config has no action " + strconv.Quote(action) + ")"
		}
		out, err := spec.Redacted(args)
		if err != nil {
			return "(arguments hidden: " + err.Error() + ")"
		}
		return string(out)
	}
}

// argsText is how a terminal prints arguments, given what argsShown returned
// for them: as JSON the way every surface shows values (show.Value:
// a string always quoted, a number as written), or argsShown's words when it
// hid them whole.
func argsText(redacted string) string {
	if !json.Valid([]byte(redacted)) {
		return term(redacted)
	}
	return term(show.Value(json.RawMessage(redacted)))
}

// redactEdited shows an approver's edited arguments. A decision does not say
// which action it edited, so every redact: list of the run's actions applies.
func redactEdited(shown argsShown, actions []record.Action, edited json.RawMessage) string {
	out := edited
	for _, a := range actions {
		out = json.RawMessage(shown(a.Name, out))
		if !json.Valid(out) {
			return term(string(out))
		}
	}
	return argsText(string(out))
}

// redactView is the run as the terminal shows it: what the redact: fields
// hold hidden wherever it appears (workflow.RedactView), with the arguments
// as shown shows them.
func redactView(v *workflow.RunView, shown argsShown) *workflow.RunView {
	return workflow.RedactView(v, func(action string, args json.RawMessage) json.RawMessage {
		out := json.RawMessage(shown(action, args))
		if !json.Valid(out) {
			return nil // hidden whole, with shown's words
		}
		return out
	})
}

// specFinder finds the spec of an action by name (Engine.Action).
type specFinder func(name string) (*workflow.ActionSpec, bool)

// editRecord is what one approver's edit changed, as the run's checkpoints
// tell it: the state before the edit against the edit's own.
type editRecord struct {
	by      string
	at      time.Time
	changes []policy.FieldChange
}

// editsOf lists the edits the run's checkpoints show, with what each
// changed. An edit whose state before was pruned is not listed: what it
// changed is not known any more.
func editsOf(hist []workflow.HistoryEntry) []editRecord {
	var out []editRecord
	var prev *record.State
	for _, h := range hist {
		if st := h.State; st != nil && prev != nil {
			for _, d := range st.Decisions[min(len(prev.Decisions), len(st.Decisions)):] {
				if d.Edited {
					out = append(out, editRecord{by: d.By, at: d.At, changes: policy.ChangedFields(prev.Actions, st.Actions)})
				}
			}
		}
		prev = h.State
	}
	return out
}

// changesText says what an edit changed, field by field: "amount 119 → 60".
// A redact: field shows as [redacted], and so does every field of an action
// the config does not declare, as the arguments do.
func changesText(changes []policy.FieldChange, actions []record.Action, find specFinder) string {
	if len(changes) == 0 {
		return "no field changed"
	}
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		name := ""
		if c.Action < len(actions) {
			name = actions[c.Action].Name
		}
		spec, ok := find(name)
		hidden := !ok || spec.Hides(c.Field)
		label := c.Field
		if len(actions) > 1 || label == "" {
			label = strings.TrimSuffix(name+"."+c.Field, ".")
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s", fieldLabel(label), fieldValue(c.From, hidden), fieldValue(c.To, hidden)))
	}
	return strings.Join(parts, ", ")
}

// fieldLabel shows a field's path as it is when each of its keys is a plain
// name (amount, card.number), and quoted as a value is otherwise, so that a
// key with a look-alike or invisible character reads unlike the plain one.
func fieldLabel(path string) string {
	for seg := range strings.SplitSeq(path, ".") {
		if show.Key(seg) != seg {
			return show.String(path)
		}
	}
	return path
}

func fieldValue(v json.RawMessage, hidden bool) string {
	switch {
	case v == nil:
		return "(none)"
	case hidden:
		return record.Redaction
	}
	return show.Value(v)
}

// renderRun prints a run the way an approver reads it: what will happen, why,
// who may say yes, by when, and what happened so far. edits are what the
// run's edits changed (editsOf), named under each edit.
func renderRun(w io.Writer, v *workflow.RunView, roles *policy.Roles, shown argsShown, find specFinder, edits []editRecord, now time.Time) {
	stored := v.Actions
	v = redactView(v, shown)
	renderRunHead(w, v)
	renderActions(w, v, stored, shown)
	renderEvidence(w, v)
	if g := v.Gate; g != nil {
		renderGate(w, v, g, roles)
	}
	if v.Deadline != nil {
		fmt.Fprintf(w, "  deadline %s", v.Deadline.Format(time.RFC3339))
		if v.Status == record.StatusWaitingApproval {
			fmt.Fprintf(w, " (%s)", deadlineText(now, *v.Deadline))
		}
		fmt.Fprintln(w)
	}
	for _, d := range v.Decisions {
		renderDecision(w, v, d, shown, find, edits)
	}
	renderOutcomes(w, v)
	renderNext(w, v, now)
}

// renderRunHead prints what the run is: its id and status, what is wrong
// with it or why it is where it is, what a prune removed, whose it is and
// what it says of itself.
func renderRunHead(w io.Writer, v *workflow.RunView) {
	fmt.Fprintf(w, "run %s  %s\n", term(v.ID), strings.ToUpper(term(string(v.Status))))
	if v.Problem != "" {
		fmt.Fprintf(w, "  PROBLEM: %s\n", term(v.Problem))
	}
	if v.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", term(v.Reason))
	}
	if p := v.Pruned; p != nil {
		fmt.Fprintf(w, "  pruned %s: the states of checkpoints 1-%d (%s), %d evidence item(s), %d agent message(s), %s were removed;\n",
			p.At.UTC().Format(time.RFC3339), p.ThroughSeq, byteSize(p.StateBytes), p.Evidence, p.Messages, outboxText(p.Outbox, p.OutboxKinds))
		fmt.Fprintln(w, "  kept: this summary, the actions, requests, decisions, operations and audit events, and every checkpoint's hash and seal")
	}
	task := v.TaskID
	if task == "" {
		task = "-"
	}
	fmt.Fprintf(w, "  task %s, workflow %s, asked by %s\n", term(task), term(v.Workflow), person(v.Requester))
	if v.Summary != "" {
		fmt.Fprintf(w, "  summary: %s\n", term(v.Summary))
	}
	if v.ModelCalls > 0 {
		fmt.Fprintf(w, "  steps: %d, model calls: %d\n", v.Step, v.ModelCalls)
	}
}

// renderActions prints the actions of v (redacted) with their arguments as
// shown shows the stored ones, and a warning for keys that read alike.
func renderActions(w io.Writer, v *workflow.RunView, stored []record.Action, shown argsShown) {
	if len(v.Actions) == 0 {
		return
	}
	head := "actions"
	switch {
	case len(v.Operations) > 0:
	case v.Status.Terminal():
		// "yet" would promise something still to come.
		head = "actions (none was carried out)"
	default:
		head = "actions (nothing has happened yet)"
	}
	fmt.Fprintf(w, "  %s:\n", head)
	for i, act := range v.Actions {
		text := shown(act.Name, stored[i].Args)
		if json.Valid([]byte(text)) {
			text = string(act.Args) // redacted, and secrets hidden elsewhere in them too
		}
		fmt.Fprintf(w, "    %d. %-20s %s\n", i+1, term(act.Name), argsText(text))
		for _, g := range policy.LookalikeKeys(act.Args) {
			fmt.Fprintf(w, "       WARNING: keys that read alike: %s; check which value is which\n", term(strings.Join(g, " and ")))
		}
	}
}

// renderEvidence prints where the evidence comes from, and the checks that
// failed.
func renderEvidence(w io.Writer, v *workflow.RunView) {
	if len(v.Evidence) > 0 {
		var src []string
		for _, e := range v.Evidence {
			src = append(src, term(e.Source))
		}
		fmt.Fprintf(w, "  evidence: %s\n", strings.Join(src, ", "))
	}
	for _, c := range v.Checks {
		if !c.OK {
			fmt.Fprintf(w, "  check failed: action %d (%s): %s\n", c.Action+1, term(c.Name), term(c.Error))
		}
	}
}

// renderGate prints what policy decided of the run: its rule, who may
// approve it, how many and so far, and who hears the outcome.
func renderGate(w io.Writer, v *workflow.RunView, g *record.Gate, roles *policy.Roles) {
	fmt.Fprintf(w, "  rule %s, risk %s, policy %s\n", term(g.Rule), term(string(g.Risk)), term(g.PolicyRevision))
	if g.Approval != nil && g.Approval.StepUp > 0 {
		fmt.Fprintf(w, "  approvals count only from the web console, after a sign-in within %s\n", show.Duration(g.Approval.StepUp.Duration()))
		for _, u := range v.Unconfirmed {
			fmt.Fprintf(w, "  approved by %s via %s at %s: waits for its confirmation on the web\n", term(u.By), term(string(u.Via)), u.At.UTC().Format(time.RFC3339))
		}
	}
	if g.Approval != nil && g.Approval.Requirement != nil {
		renderComposite(w, v, g.Approval)
	} else if g.Approval != nil {
		who := term(strings.Join(roles.Members(g.Approval.Role), ", "))
		fmt.Fprintf(w, "  approval: %d of %s or above (%s)", g.Approval.Count, term(g.Approval.Role), who)
		if !g.Approval.SelfApproval {
			fmt.Fprint(w, "; not the requester")
		}
		if g.Approval.Edit {
			fmt.Fprint(w, "; may edit")
		}
		fmt.Fprintln(w)
		if g.Assignee != "" {
			fmt.Fprintf(w, "  assigned to %s (anyone above %s may still decide)\n", term(g.Assignee), term(g.Approval.Role))
		}
		if v.Status == record.StatusWaitingApproval {
			noun := "approvals"
			if g.Approval.Count == 1 {
				noun = "approval"
			}
			fmt.Fprintf(w, "  %d of %d %s so far\n", approvalsSoFar(v), g.Approval.Count, noun)
		}
	}
	if len(g.Notify) > 0 {
		fmt.Fprintf(w, "  the outcome goes to %s (notify)\n", term(strings.Join(g.Notify, ", ")))
	}
	renderReminders(w, v, g)
	renderEscalations(w, v, g)
	if g.Window != nil {
		fmt.Fprintf(w, "  runs only within its execution window %s\n", term(g.Window.String()))
	}
	renderForced(w, v)
	fmt.Fprintf(w, "  fingerprint %s  (%s)\n", term(policy.ShortFingerprint(g.Fingerprint)), term(g.Fingerprint))
}

// renderDecision prints one decision; an edit with what it changed (edits),
// or with its result when what it changed is not known any more.
func renderDecision(w io.Writer, v *workflow.RunView, d workflow.DecisionView, shown argsShown, find specFinder, edits []editRecord) {
	// An edit is recorded as an approval of the old proposal, followed by
	// the editor's approval of the new one: naming it "edit", as Slack
	// does, keeps the two from reading as one approval printed twice.
	verb := string(d.Decision)
	if len(d.Edited) > 0 {
		verb = "edit"
	}
	by := term(d.By)
	if d.OnBehalfOf != "" {
		by += " on behalf of " + term(d.OnBehalfOf)
	}
	line := fmt.Sprintf("  %s by %s (%s) via %s at %s", term(verb), by, term(d.Role), term(string(d.Via)), d.At.Format(time.RFC3339))
	var changed *editRecord
	if len(d.Edited) > 0 {
		for i := range edits {
			if edits[i].by == d.By && edits[i].at.Equal(d.At) {
				changed = &edits[i]
			}
		}
		if changed == nil {
			// The state before the edit was pruned: only the result is known.
			line += " to " + redactEdited(shown, v.Actions, d.Edited)
		}
	}
	if d.Reason != "" {
		line += ": " + term(d.Reason)
	}
	fmt.Fprintln(w, line)
	if changed != nil {
		fmt.Fprintf(w, "    edited by %s: %s\n", term(d.By), term(changesText(changed.changes, v.Actions, find)))
	}
}

// renderReminders prints when who may still decide is reminded before the
// deadline (the gate's remind), and the reminders sent so far.
func renderReminders(w io.Writer, v *workflow.RunView, g *record.Gate) {
	if len(g.Remind) == 0 {
		return
	}
	before := make([]string, len(g.Remind))
	for i, d := range g.Remind {
		before[i] = d.Duration().String()
	}
	fmt.Fprintf(w, "  reminders %s before the deadline (at most one every 4h)\n", strings.Join(before, ", "))
	for _, r := range v.Reminders {
		if r.Passed {
			fmt.Fprintf(w, "  reminder %s before: passed at %s (a later one was sent)\n", r.Before.Duration(), r.At.Format(time.RFC3339))
			continue
		}
		who := "nobody left to mention"
		if len(r.Mention) > 0 {
			who = "mentioning " + term(strings.Join(r.Mention, ", "))
		}
		fmt.Fprintf(w, "  reminded %s before the deadline at %s, %s\n", r.Before.Duration(), r.At.Format(time.RFC3339), who)
	}
}

// renderEscalations prints the gate's escalation steps and those applied.
func renderEscalations(w io.Writer, v *workflow.RunView, g *record.Gate) {
	if len(g.Escalate) == 0 {
		return
	}
	for i, s := range g.Escalate {
		fmt.Fprintf(w, "  escalation %d: %s after the request, %s may decide too%s\n", i, s.After.Duration(), term(escalatedWho(s.Role, s.Users)), extendText(s.Extend))
	}
	for _, e := range v.Escalations {
		fmt.Fprintf(w, "  escalated (step %d) at %s: %s may decide too%s\n", e.Step, e.At.Format(time.RFC3339), term(escalatedWho(e.Role, e.Users)), extendText(e.Extended))
	}
}

func escalatedWho(role string, users []string) string {
	if role != "" {
		return role + " or above"
	}
	return strings.Join(users, ", ")
}

func extendText(d record.Seconds) string {
	if d <= 0 {
		return ""
	}
	return ", the deadline " + d.Duration().String() + " later"
}

// renderOutcomes prints what came of the actions: the operations, and the
// resolutions of the runs that needed a person.
func renderOutcomes(w io.Writer, v *workflow.RunView) {
	for _, op := range v.Operations {
		fmt.Fprintf(w, "  operation %s %s: %s (%d call(s))", term(op.Key), term(op.Action), term(string(op.Status)), op.Attempts)
		if len(op.Receipt) > 0 {
			fmt.Fprintf(w, " receipt %s", argsText(string(op.Receipt)))
		}
		if op.Error != "" {
			fmt.Fprintf(w, " — %s", term(op.Error))
		}
		fmt.Fprintln(w)
	}
	for _, r := range v.Resolutions {
		line := fmt.Sprintf("  resolved by %s via %s at %s: %s", term(r.By), term(orDash(r.Via)), r.At.Format(time.RFC3339), term(r.Choice.Describe()))
		if r.Key != "" {
			line += " (" + term(r.Key) + ")"
		}
		fmt.Fprintln(w, line+": "+term(r.Reason))
	}
}

// renderNext prints what comes next for the run, and who does it: the
// target asked again, a person resolving it or deciding it; and where a
// fork came from.
func renderNext(w io.Writer, v *workflow.RunView, now time.Time) {
	if v.RetryAt != nil && v.Status == record.StatusExecuting {
		when := "due now"
		if v.RetryAt.After(now) {
			when = deadlineText(now, *v.RetryAt)
		}
		fmt.Fprintf(w, "  waiting for the target: asking the target again at %s (%s)\n", v.RetryAt.Format(time.RFC3339), when)
		fmt.Fprintf(w, "  next: a running serve asks again then; without one, %s waits and asks\n", shellLine("signoff", "resume", term(v.ID)))
	}
	renderScheduled(w, v, now)
	if v.Status == record.StatusNeedsAttention && v.Problem == "" {
		fmt.Fprintf(w, "  next: look at the target, then %s with --happened, --did-not-happen --retry or --did-not-happen --abandon\n",
			shellLine("signoff", "resolve", term(v.ID), "--as", "MEMBER", "--reason", "WHAT-YOU-CHECKED"))
	}
	if v.ForkedFrom != nil {
		fmt.Fprintf(w, "  forked from %s at checkpoint %d\n", term(v.ForkedFrom.RunID), v.ForkedFrom.Seq)
	}
	if v.Status == record.StatusWaitingApproval && v.Problem == "" {
		// The hint binds the approval to what was just shown, as docs/cli.md advises.
		approve := []string{"signoff", "approve", term(v.ID), "--as", "MEMBER"}
		if v.Gate != nil && v.Gate.Fingerprint != "" {
			approve = append(approve, "--fingerprint", term(policy.ShortFingerprint(v.Gate.Fingerprint)))
		}
		fmt.Fprintf(w, "  next: %s   or   %s\n", shellLine(approve...), shellLine("signoff", "reject", term(v.ID), "--as", "MEMBER", "--reason", "WHY"))
	}
}

// approvalsSoFar counts the approvals given to the request the run waits on.
func approvalsSoFar(v *workflow.RunView) int {
	n := 0
	for _, d := range v.Decisions {
		if d.Decision == record.VerdictApprove && v.Gate != nil && d.RequestID == v.Gate.RequestID {
			n++
		}
	}
	return n
}

// deadlineText says when a deadline falls, from now: "in 2h05m", or "expired
// 3m ago" once it has passed (a waiting run is expired when next touched).
func deadlineText(now, deadline time.Time) string {
	switch left := deadline.Sub(now); {
	case left <= 0:
		if ago := since(now, deadline); ago != "just now" {
			return "expired " + ago + " ago"
		}
		return "expired just now"
	case left < time.Minute:
		return "in less than a minute"
	}
	return "in " + since(deadline, now)
}

func person(p record.Person) string {
	if p.Name != "" && p.Name != p.ID {
		return fmt.Sprintf("%s (%s)", term(p.ID), term(p.Name))
	}
	return term(p.ID)
}

func renderRuns(w io.Writer, runs []*workflow.RunView, now time.Time) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tTASK\tREQUESTER\tACTION\tAGE\tDEADLINE\tSUMMARY")
	for _, r := range runs {
		deadline := "-"
		if r.Status == record.StatusWaitingApproval && r.Deadline != nil {
			deadline = deadlineText(now, *r.Deadline)
		}
		var names []string
		for _, a := range r.Actions {
			names = append(names, a.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term(r.ID), statusText(r), term(orDash(r.TaskID)), term(orDash(r.Requester.ID)),
			term(orDash(strings.Join(names, ","))), since(now, r.CreatedAt), deadline, term(orDash(firstLine(cutRunes(r.Summary, 60)))))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cutRunes shortens s to at most n runes, marking the cut.
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// renderTrace prints each step of an agent run with what it asked and learned.
func renderTrace(w io.Writer, hist []workflow.HistoryEntry, shown argsShown, ledgerCalls int) {
	var prev *record.State
	for _, h := range hist {
		st := h.State
		if st == nil {
			fmt.Fprintf(w, "checkpoint %d: unreadable (%s)\n", h.Seq, term(h.Problem))
			continue
		}
		if prev == nil || st.Step > prev.Step {
			from := 0
			if prev != nil {
				from = len(prev.Messages)
			}
			if st.Step > 0 {
				fmt.Fprintf(w, "step %d (model calls so far: %d)\n", st.Step, st.ModelCalls)
			}
			for _, m := range st.Messages[min(from, len(st.Messages)):] {
				switch {
				case m.Role == "assistant" && m.Tool != "":
					fmt.Fprintf(w, "  model asks %s %s\n", term(m.Tool), term(string(m.Args)))
				case m.Role == "tool":
					fmt.Fprintf(w, "  %s returned %d bytes\n", term(m.Tool), len(m.Result))
				case m.Content != "":
					fmt.Fprintf(w, "  %s: %s\n", term(m.Role), term(firstLine(m.Content)))
				}
			}
			if st.Proposed && (prev == nil || !prev.Proposed) {
				for i, a := range st.Actions {
					fmt.Fprintf(w, "  proposes %d. %s %s\n", i+1, term(a.Name), argsText(shown(a.Name, a.Args)))
				}
			}
		}
		if prev == nil || st.Status != prev.Status {
			fmt.Fprintf(w, "checkpoint %d: %s\n", h.Seq, term(string(st.Status)))
		}
		prev = st
	}
	if prev != nil {
		fmt.Fprintf(w, "model calls: %d recorded in the run, %d in the provider's usage log\n", prev.ModelCalls, ledgerCalls)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

func renderChanges(w io.Writer, ch []demo.Change) {
	if len(ch) == 0 {
		fmt.Fprintln(w, "0 change(s) in the shop")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tORDER\tPAYMENT/SKU\tAMOUNT\tKEY\tBY")
	for _, c := range ch {
		what := c.PaymentID
		if what == "" {
			what = fmt.Sprintf("%s x%d", c.SKU, c.Quantity)
		}
		amount := "-"
		if c.Amount != "" {
			amount = c.Amount + " " + c.Currency
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term(c.Kind), term(c.ID), term(c.OrderID), term(what), term(amount), term(c.Key), term(c.By))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d change(s) in the shop\n", len(ch))
}

func renderOrders(w io.Writer, orders []demo.OrderWithPayments) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tCUSTOMER\tSTATUS\tTOTAL\tPAYMENT\tCHARGED\tSTATE\tREFUNDABLE")
	for _, o := range orders {
		head := fmt.Sprintf("%s\t%s\t%s\t%s %s", term(o.ID), term(o.Customer), term(o.Status), term(o.Total), term(o.Currency))
		if len(o.Payments) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\n", head)
		}
		for i, p := range o.Payments {
			if i > 0 {
				head = "\t\t\t"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s %s\n", head, term(p.ID), term(p.Amount), term(p.Currency), term(p.Status), term(p.Remaining), term(p.Currency))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%d order(s) in the shop\n", len(orders))
}
