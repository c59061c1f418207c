package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// Slack's Block Kit limits (docs.slack.dev/reference/block-kit). Lengths are
// measured here in bytes, which is never less than what Slack counts.
const (
	MaxBlocks       = 50
	MaxSectionText  = 3000
	MaxFieldText    = 2000
	MaxFields       = 10
	MaxHeaderText   = 150
	MaxButtonValue  = 2000
	MaxActionID     = 255
	MaxBlockID      = 255
	MaxContextElems = 10
)

// Budgets of the approval message, well inside the limits: the message is read
// in five seconds, and a click carries the whole message back to us.
const (
	maxActionSections = 20 // actions shown one per section; the rest are named
	maxActionText     = 1500
	// maxArgValue bounds one argument value as shown: escaped, a character
	// outside printable ASCII takes six (\uXXXX), so 100 of them fit.
	maxArgValue      = 600
	maxArgLines      = 25
	maxEvidence      = 6
	maxEvidenceValue = 160
	maxEvidenceText  = 1500
	maxMentions      = 12
	maxSummary       = 1200
	maxFallback      = 300
)

// RenderContext is what rendering needs besides the run.
type RenderContext struct {
	// Roles orders roles and names their members, for "who may approve".
	Roles *policy.Roles
	// Redact returns the arguments of action as people may see them. It must
	// fail closed: nil hides the arguments. A nil Redact hides every argument;
	// use Redactor for the engine's action specs.
	Redact func(action string, args json.RawMessage) json.RawMessage
	// Now is when the message is rendered, for ages and time left.
	Now time.Time
	// UserGroups maps a role to the Slack user group holding it, mentioned
	// under "who may approve". Optional.
	UserGroups map[string]string
	// Command is the slash command, named in hints (default /runs).
	Command string
	// ConsoleURL is the web console's address (ui.base_url), from the
	// config only: a step-up rule's message links to the run's page there.
	// Optional.
	ConsoleURL string
}

// shown is Redact, failing closed.
func (rc RenderContext) shown(action string, args json.RawMessage) json.RawMessage {
	if rc.Redact == nil {
		return nil
	}
	return rc.Redact(action, args)
}

func (rc RenderContext) slash() string {
	if rc.Command == "" {
		return DefaultCommand
	}
	return rc.Command
}

// ActionSpecs finds an action's spec; *workflow.Engine has it.
type ActionSpecs interface {
	Action(name string) (*workflow.ActionSpec, bool)
}

// Redactor returns a Redact function over the engine's action specs. An
// action without a spec, or arguments that fail to redact, are hidden.
func Redactor(specs ActionSpecs) func(string, json.RawMessage) json.RawMessage {
	return func(name string, args json.RawMessage) json.RawMessage {
		spec, ok := specs.Action(name)
		if !ok {
			return nil
		}
		out, err := spec.Redacted(args)
		if err != nil {
			return nil
		}
		return out
	}
}

// RenderRun renders a run as the Block Kit message posted for its approval
// and rewritten as it moves on: while it waits, what will happen, the
// evidence, who asked, the rule and risk, who may approve and by when, with
// Approve, Reject and (when the rule allows) Edit buttons; once decided or
// ended, no buttons, who decided and when, and the outcome with receipt ids.
func RenderRun(v *workflow.RunView, rc RenderContext) []slack.Block {
	return renderRun(v, rc, true)
}

func renderRun(v *workflow.RunView, rc RenderContext, withButtons bool) []slack.Block {
	// What the redact: fields hold is hidden wherever the run shows it: a
	// receipt's echo, an error, the summary.
	v = workflow.RedactView(v, rc.shown)
	var blocks []slack.Block
	add := func(b slack.Block) { blocks = append(blocks, b) }

	add(slack.NewHeaderBlock(bkPlain(cutText(plainText(headline(v, rc.Now)), MaxHeaderText))))
	if s := statusText(v, rc); s != "" {
		add(bkSection(s))
	}
	if s := outcomeText(v); s != "" {
		add(bkSection(s))
	}
	// Every block but the actions is counted first, so that the actions get
	// what is left of the 50 and the message never goes over.
	fixed := len(blocks) + 5 // requester's words, facts, context, a notice, buttons
	stepUp := awaitsDecision(v, rc.Now) && stepUpOf(v) > 0
	if stepUp {
		fixed++ // where to confirm
	}
	room := min(actionSections(v, rc.Now), MaxBlocks-fixed-1)
	// Whole: every action and every argument an approval would run is shown
	// here, uncut. Only then may the message approve them.
	whole := true
	for i, a := range v.Actions {
		if i == room-1 && len(v.Actions) > room {
			add(bkSection(moreActions(v.Actions[i:], i, v.ID)))
			whole = false
			break
		}
		text, all := actionText(i, a, rc)
		add(bkSection(text))
		whole = whole && all
	}
	add(requesterBlock(v))
	if f := facts(v, rc); len(f) > 0 {
		add(slack.NewSectionBlock(nil, f, nil))
	}
	add(slack.NewContextBlock("", bkMrkdwn(cutText(idLine(v), MaxSectionText))))
	if stepUp {
		// Said before anyone clicks, not only in the thread after: a click
		// here alone does not approve.
		add(slack.NewContextBlock("", bkMrkdwn(cutText(stepUpText(v, rc.ConsoleURL), MaxSectionText))))
	}
	if withButtons && awaitsDecision(v, rc.Now) {
		if !whole {
			add(bkSection(notWholeText(v.ID)))
		}
		add(buttons(v, whole))
	}
	return blocks
}

// notWholeText says why a message that cannot show everything an approval
// would run has no Approve button: approving is for the CLI, which shows it
// all.
func notWholeText(runID string) string {
	return fmt.Sprintf(":warning: Not everything this run would do fits in this message, so it cannot be approved here. "+
		"Review it whole with %s and approve it there with %s, or reject it here.",
		mdCode("signoff show "+runID, 100), mdCode("signoff approve "+runID+" --as YOU", 120))
}

// awaitsDecision reports whether the run can take a decision now.
func awaitsDecision(v *workflow.RunView, now time.Time) bool {
	if v.Status != record.StatusWaitingApproval || v.Problem != "" || v.Gate == nil || v.Gate.RequestID == "" {
		return false
	}
	return v.Deadline == nil || now.Before(*v.Deadline)
}

// FallbackText is the message's plain text: what notifications and screen
// readers show. One short line.
func FallbackText(v *workflow.RunView) string {
	var b strings.Builder
	b.WriteString(mdEscape(headline(v, time.Time{})))
	b.WriteString(" (run " + mdEscape(v.ID))
	if v.Fingerprint != "" {
		b.WriteString(", fingerprint " + policy.ShortFingerprint(v.Fingerprint))
	}
	b.WriteString(")")
	return cutText(b.String(), maxFallback)
}

// headline is the header: the state in one word and the actions by name.
func headline(v *workflow.RunView, now time.Time) string {
	word := map[record.Status]string{
		record.StatusRunning:         "Working",
		record.StatusWaitingApproval: "Approval needed",
		record.StatusScheduled:       "Approved, scheduled",
		record.StatusExecuting:       "Approved, running",
		record.StatusDone:            "Done",
		record.StatusFailed:          "Failed",
		record.StatusRejected:        "Rejected",
		record.StatusExpired:         "Expired",
		record.StatusCancelled:       "Cancelled",
		record.StatusNeedsAttention:  "Needs attention",
	}[v.Status]
	if word == "" {
		word = string(v.Status)
	}
	if v.Problem != "" {
		word = "Needs attention"
	} else if v.Status == record.StatusWaitingApproval && v.Deadline != nil && !now.IsZero() && !now.Before(*v.Deadline) {
		word = "Deadline passed"
	}
	names := make([]string, 0, len(v.Actions))
	for _, a := range v.Actions {
		names = append(names, a.Name)
	}
	switch {
	case len(names) == 0:
		return word
	case len(names) <= 3:
		return word + ": " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s: %s and %d more", word, strings.Join(names[:2], ", "), len(names)-2)
}

// statusText says what happened so far: decisions and where the run stands.
func statusText(v *workflow.RunView, rc RenderContext) string {
	var lines []string
	if v.Problem != "" {
		lines = append(lines, ":warning: *Stored state failed its integrity check.* A person must look at this run before anything else happens: "+mdEscape(cutText(v.Problem, 600)))
	}
	lines = append(lines, latestLines(decisionLines(v), maxDecisionLines, "decisions", v.ID)...)
	if s := stateLine(v, rc); s != "" {
		lines = append(lines, s)
	}
	return cutLines(lines, MaxSectionText, func(n int) string { return fmt.Sprintf("…and %d more lines", n) })
}

// decisionLines is one line for each edit, and for each approval or
// rejection of the current request.
func decisionLines(v *workflow.RunView) []string {
	var lines []string
	current := ""
	if v.Gate != nil {
		current = v.Gate.RequestID
	}
	for _, d := range v.Decisions {
		switch {
		case len(d.Edited) > 0:
			lines = append(lines, fmt.Sprintf(":pencil2: *Edited* by %s %s%s", mdMention(d.By, d.Name), slackDate(d.At), reasonSuffix(d.Reason)))
		case d.RequestID != current:
			// A decision on a request an edit replaced: the edit line says it.
		case d.Decision == record.VerdictApprove:
			lines = append(lines, fmt.Sprintf(":white_check_mark: *Approved* by %s (%s) %s", decidedBy(d), mdEscape(d.Role), slackDate(d.At)))
		case d.Decision == record.VerdictReject:
			lines = append(lines, fmt.Sprintf(":x: *Rejected* by %s (%s) %s%s", decidedBy(d), mdEscape(d.Role), slackDate(d.At), reasonSuffix(d.Reason)))
		}
	}
	return lines
}

// stateLine says where the run stands: how many approvals so far, what
// running is waiting for, or how it ended. Empty when there is nothing to
// say.
func stateLine(v *workflow.RunView, rc RenderContext) string {
	req := currentRequest(v)
	switch v.Status {
	case record.StatusWaitingApproval:
		return approvalsSoFar(v, req)
	case record.StatusExecuting:
		if v.RetryAt != nil && v.RetryAt.After(rc.Now) {
			return ":hourglass_flowing_sand: Running the approved actions: the target asked for time; asking it again " + slackDate(*v.RetryAt) + "."
		}
		return ":gear: Running the approved actions now."
	case record.StatusScheduled:
		return scheduledLine(v)
	case record.StatusExpired:
		at := ""
		if req != nil {
			at = " " + slackDate(req.Deadline)
		}
		return ":hourglass: *Expired*: nobody decided before the deadline" + at + ". Nothing was done."
	case record.StatusCancelled:
		return cancelledLine(v, req)
	case record.StatusRejected:
		return "Nothing was done."
	case record.StatusFailed:
		return ":x: *Failed*: " + mdCode(v.Reason, 600)
	case record.StatusNeedsAttention:
		return ":warning: *Needs attention*: " + mdCode(v.Reason, 600) + "\nA person must look at the target, then resolve it: `" +
			mdEscape(rc.slash()) + " resolve " + mdEscape(v.ID) + " happened|retry|abandon reason…` or `signoff resolve " + mdEscape(v.ID) + "`."
	case record.StatusDone:
		return ":white_check_mark: *Done.*"
	}
	return ""
}

// approvalsSoFar counts the approvals of a request that needs more than one;
// empty for a request one approval decides.
func approvalsSoFar(v *workflow.RunView, req *workflow.RequestView) string {
	if req == nil || req.Count <= 1 {
		return ""
	}
	n := 0
	for _, d := range v.Decisions {
		if d.RequestID == req.ID && d.Decision == record.VerdictApprove {
			n++
		}
	}
	return fmt.Sprintf("%d of %d approvals so far.", n, req.Count)
}

// cancelledLine says who cancelled the run, when, and why.
func cancelledLine(v *workflow.RunView, req *workflow.RequestView) string {
	by, at := "", ""
	if req != nil && req.DecidedBy != "" {
		by = " by " + mdMention(req.DecidedBy, "")
		if req.DecidedAt != nil {
			at = " " + slackDate(*req.DecidedAt)
		}
	}
	why := v.Reason
	if _, after, ok := strings.Cut(why, ": "); ok && strings.HasPrefix(why, "cancelled by ") {
		why = after
	}
	return ":no_entry_sign: *Cancelled*" + by + at + reasonSuffix(why) + " Nothing was done."
}

// reasonSuffix shows a reason someone typed (an approver, or an agent that
// cancelled its run) literally, in a code span: mrkdwn in it means nothing.
func reasonSuffix(reason string) string {
	if reason == "" {
		return "."
	}
	return ": " + mdCode(reason, maxShownReason)
}

// operationLines is the outcome of each action: its receipt, or why there is none.
func operationLines(v *workflow.RunView) []string {
	var lines []string
	resolved := map[string]record.ResolutionRecord{}
	for _, r := range v.Resolutions {
		resolved[r.Key] = r
	}
	for i, op := range v.Operations {
		var s string
		r, byPerson := resolved[op.Key]
		switch {
		case byPerson && op.Status != record.OpPending:
			s = "resolved by " + mdMention(r.By, "") + ": " + mdEscape(r.Choice.Describe())
			if op.Status == record.OpCommitted {
				s += ", receipt " + mdCode(receiptID(op.Receipt), 80)
			}
			lines = append(lines, fmt.Sprintf("• %d. %s: %s", i+1, mdEscape(op.Action), s))
			continue
		}
		switch op.Status {
		case record.OpCommitted:
			s = "done, receipt " + mdCode(receiptID(op.Receipt), 80)
		case record.OpFailed:
			s = "refused by the target: " + mdCode(op.Error, maxOpError)
		case record.OpUnknown:
			s = ":warning: outcome unknown, a person must check: " + mdCode(op.Error, maxOpError)
		default:
			s = "in progress"
		}
		lines = append(lines, fmt.Sprintf("• %d. %s: %s", i+1, mdEscape(op.Action), s))
	}
	return lines
}

func receiptID(r json.RawMessage) string {
	var rc struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(r, &rc) != nil || rc.ID == "" {
		return "(none)"
	}
	return rc.ID
}

func currentRequest(v *workflow.RunView) *workflow.RequestView {
	if v.Gate == nil || v.Gate.RequestID == "" {
		return nil
	}
	for i := range v.Requests {
		if v.Requests[i].ID == v.Gate.RequestID {
			return &v.Requests[i]
		}
	}
	return nil
}

// actionText is one action and its arguments, redacted, one per line. all
// says whether the text shows the action whole: its name, and every
// argument's key and value uncut. Arguments the config's redaction hides are
// shown as hidden, which counts as shown: the config decided it, not the
// length of what an agent wrote.
func actionText(i int, a record.Action, rc RenderContext) (text string, all bool) {
	const maxName, maxKey = 100, 60
	head := fmt.Sprintf("*%d. %s*", i+1, mdEscape(cutText(a.Name, maxName)))
	all = len(a.Name) <= maxName
	shown := rc.shown(a.Name, a.Args)
	if shown == nil {
		return head + "\n_arguments hidden_", all
	}
	fields, ok := show.Fields(shown)
	if !ok {
		// Not an object: show it whole, as a value.
		room := maxActionText - len(head) - 10
		v := show.Value(shown)
		return head + "\n" + mdCode(v, room), all && len(v) <= room
	}
	lines := []string{head}
	// Keys that read alike reach here only when the schema names each; say
	// so first, where no cut can drop it.
	for _, g := range policy.LookalikeKeys(shown) {
		lines = append(lines, ":warning: *Keys that read alike:* "+lookalikeText(g)+". Check which value is which.")
	}
	for _, f := range fields {
		if len(lines) > maxArgLines {
			all = false
			break
		}
		// The key in a code span too: an agent wrote it, and mrkdwn in it
		// (bold, links, emoji) would pass for signoff's own words. Values
		// are shown as JSON (show.Value), so that a string never
		// reads like a number, a boolean, null or an object.
		lines = append(lines, "• "+mdCode(f.Key, maxKey)+": "+mdCode(f.Value, maxArgValue))
		all = all && len(f.Key) <= maxKey && len(f.Value) <= maxArgValue
	}
	if len(fields) > maxArgLines {
		lines = append(lines, fmt.Sprintf("…and %d more arguments", len(fields)-maxArgLines))
	}
	text = cutLines(lines, maxActionText, func(n int) string { return fmt.Sprintf("…and %d more arguments", n) })
	return text, all && text == strings.Join(lines, "\n")
}

// lookalikeText lists the paths of keys that read alike, each in a code span.
func lookalikeText(paths []string) string {
	shown := make([]string, len(paths))
	for i, p := range paths {
		shown[i] = mdCode(p, 80)
	}
	return strings.Join(shown, " and ")
}

// valueText shows a JSON string as its text and anything else as compact
// JSON: for the requester's evidence, which is their words, not what runs.
func valueText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func moreActions(rest []record.Action, from int, runID string) string {
	names := make([]string, 0, len(rest))
	for _, a := range rest {
		names = append(names, mdEscape(a.Name))
	}
	return cutText(fmt.Sprintf("*%d–%d.* …and %d more actions: %s. See them all with %s.",
		from+1, from+len(rest), len(rest), strings.Join(names, ", "), mdCode("signoff show "+runID, 100)), MaxSectionText)
}

// RequesterLabel heads the one block of the message that holds what the
// requester wrote.
const RequesterLabel = "Written by the requester, not checked by signoff:"

// requesterBlock is the one block that holds what the requester (an agent,
// usually) wrote: who they say they are, the task, their summary and the
// evidence. It is plain text, so nothing in it is read as mrkdwn, with every
// field inert and on lines of its own under a label; nothing an agent writes
// can look like an action, which are rendered only from stored arguments.
func requesterBlock(v *workflow.RunView) *slack.SectionBlock {
	lines := []string{RequesterLabel, "Asked by: " + plainText(cutText(personLine(v.Requester), 200))}
	if v.TaskID != "" {
		lines = append(lines, "Task: "+plainText(cutText(v.TaskID, 200)))
	}
	if v.Summary != "" {
		lines = append(lines, "Summary: "+plainText(cutText(v.Summary, maxSummary)))
	}
	if len(v.Evidence) > 0 {
		lines = append(lines, "Evidence:")
		for i, e := range v.Evidence {
			if i == maxEvidence {
				lines = append(lines, fmt.Sprintf("…and %d more", len(v.Evidence)-maxEvidence))
				break
			}
			lines = append(lines, "  - "+plainText(cutText(e.Source, 60))+": "+plainText(cutText(evidenceSummary(e.Data), maxEvidenceValue)))
		}
	}
	text := cutLines(lines, MaxSectionText, func(n int) string { return fmt.Sprintf("…and %d more lines", n) })
	return slack.NewSectionBlock(bkPlain(text), nil, nil)
}

// personLine is a person as plain text: "id (name)", or the id alone.
func personLine(p record.Person) string {
	if p.Name != "" && p.Name != p.ID {
		return p.ID + " (" + p.Name + ")"
	}
	return p.ID
}

// evidenceSummary reads an object's top level as "key value · key value",
// with lists and objects counted rather than shown; anything else is compact JSON.
func evidenceSummary(data json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return compactJSON(data)
	}
	var parts []string
	size := 0
	for dec.More() && size < maxEvidenceValue {
		key, err := dec.Token()
		if err != nil {
			return compactJSON(data)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return compactJSON(data)
		}
		k, _ := key.(string)
		var part string
		switch raw[0] {
		case '[':
			var items []json.RawMessage
			_ = json.Unmarshal(raw, &items)
			part = fmt.Sprintf("%s: %d", k, len(items))
			if len(items) == 1 {
				part += " item"
			} else {
				part += " items"
			}
		case '{':
			part = k + ": {…}"
		default:
			part = k + " " + valueText(raw)
		}
		parts = append(parts, part)
		size += len(part) + 3
	}
	return strings.ReplaceAll(strings.Join(parts, " · "), "\n", " ")
}

func compactJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

// facts are the short fields: who asked, the rule and risk, who may approve, the deadline.
func facts(v *workflow.RunView, rc RenderContext) []*slack.TextBlockObject {
	var f []*slack.TextBlockObject
	field := func(title, body string) {
		f = append(f, bkMrkdwn(cutText("*"+title+"*\n"+body, MaxFieldText)))
	}
	if slackUserID.MatchString(v.Requester.ID) {
		// A Slack user is linked; any other requester is named only in the
		// requester's block, since what they call themselves is their own text.
		field("Asked by", "<@"+v.Requester.ID+">")
	}
	if g := v.Gate; g != nil {
		field("Rule", mdCode(g.Rule, 200)+" · "+riskText(g.Risk))
		if l := forcedLine(v); l != "" {
			field("Break-glass", l)
		}
		if g.Approval != nil && v.Status == record.StatusWaitingApproval && v.Problem == "" {
			field("Who may approve", whoMayApprove(v, g, rc)+escalatedLine(v))
		}
		if g.Window != nil && v.Status == record.StatusWaitingApproval {
			field("Runs only within", mdEscape(g.Window.String()))
		}
	}
	if v.Status == record.StatusWaitingApproval && v.Deadline != nil {
		field("Deadline", slackDate(*v.Deadline)+" ("+untilText(rc.Now, *v.Deadline)+")")
	}
	if len(f) > MaxFields {
		f = f[:MaxFields]
	}
	return f
}

func riskText(risk record.Risk) string {
	switch risk {
	case record.RiskHigh:
		return ":red_circle: high risk"
	case record.RiskMedium:
		return ":large_orange_circle: medium risk"
	case record.RiskLow:
		return ":large_green_circle: low risk"
	}
	return mdEscape(string(risk)) + " risk"
}

func whoMayApprove(v *workflow.RunView, g *record.Gate, rc RenderContext) string {
	if g.Approval.Requirement != nil {
		return whoMayApproveComposite(v, g)
	}
	a := g.Approval
	var b strings.Builder
	fmt.Fprintf(&b, "%d of *%s* or above", a.Count, mdEscape(a.Role))
	if !a.SelfApproval {
		b.WriteString(" · not the requester")
	}
	if a.Edit {
		b.WriteString(" · may edit")
	}
	if g.Assignee != "" {
		b.WriteString("\nAssigned to " + mdMention(g.Assignee, ""))
	}
	var who []string
	if rc.Roles != nil {
		names := rc.Roles.Names()
		if i := slices.Index(names, a.Role); i >= 0 {
			for _, r := range names[i:] {
				if id := rc.UserGroups[r]; id != "" {
					who = append(who, "<!subteam^"+mdEscape(id)+">")
				}
			}
		}
		members := rc.Roles.Members(a.Role)
		for i, m := range members {
			if i == maxMentions {
				who = append(who, fmt.Sprintf("and %d more", len(members)-maxMentions))
				break
			}
			who = append(who, mdMention(m, ""))
		}
	}
	if len(who) > 0 {
		b.WriteString("\n" + strings.Join(who, " "))
	}
	return b.String()
}

func idLine(v *workflow.RunView) string {
	parts := []string{"Run " + mdCode(v.ID, 100)}
	if v.Fingerprint != "" {
		parts = append(parts, "fingerprint "+mdCode(policy.ShortFingerprint(v.Fingerprint), 20))
	}
	if v.Gate != nil && v.Gate.PolicyRevision != "" {
		parts = append(parts, "policy "+mdCode(v.Gate.PolicyRevision, 100))
	}
	parts = append(parts, "asked "+slackDate(v.CreatedAt))
	return strings.Join(parts, " · ")
}

// buttons are a waiting run's decision buttons: Reject, and Approve (and
// Edit, where the rule allows it) only when the message shows the run whole.
// Approve asks for confirmation when the risk is high: one more click for
// what cannot be undone.
func buttons(v *workflow.RunView, approvable bool) slack.Block {
	g := v.Gate
	value := Ref{RunID: v.ID, RequestID: g.RequestID, Fingerprint: g.Fingerprint}.String()
	approve := slack.NewButtonBlockElement(ActionApprove, value, bkPlain("Approve")).WithStyle(slack.StylePrimary)
	if text := approveConfirmText(v); text != "" {
		approve = approve.WithConfirm(slack.NewConfirmationBlockObject(
			bkPlain("Approve this?"), bkPlain(text), bkPlain("Approve"), bkPlain("Cancel")).WithStyle(slack.StylePrimary))
	}
	reject := slack.NewButtonBlockElement(ActionReject, value, bkPlain("Reject")).WithStyle(slack.StyleDanger)
	if !approvable {
		return slack.NewActionBlock(cutText("signoff_decide_"+g.RequestID, MaxBlockID), reject)
	}
	elems := []slack.BlockElement{approve, reject}
	if g.Approval != nil && g.Approval.Edit {
		elems = append(elems, slack.NewButtonBlockElement(ActionEdit, value, bkPlain("Edit")))
	}
	// The block id names the request, so a message rewritten for a new
	// request (after an edit) never reuses the old one's block id.
	return slack.NewActionBlock(cutText("signoff_decide_"+g.RequestID, MaxBlockID), elems...)
}

// approveConfirmText is what the Approve button's dialog says, or "" for
// no dialog: a high risk asks one more click for what cannot be undone, and
// a step-up rule says the click is not yet an approval.
func approveConfirmText(v *workflow.RunView) string {
	g := v.Gate
	var parts []string
	if g.Risk == record.RiskHigh {
		n := len(v.Actions)
		what := "1 action"
		if n != 1 {
			what = strconv.Itoa(n) + " actions"
		}
		parts = append(parts, fmt.Sprintf("This is high risk. Approving runs %s as shown (fingerprint %s) and cannot be undone from Slack.",
			what, policy.ShortFingerprint(g.Fingerprint)))
	}
	if maxAge := stepUpOf(v); maxAge > 0 {
		parts = append(parts, "This rule counts your approval only once you confirm it on signoff's web console after a sign-in within "+show.Duration(maxAge)+".")
	}
	return strings.Join(parts, " ")
}

// --- text helpers ---

func bkPlain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func bkMrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

func bkSection(text string) *slack.SectionBlock {
	return slack.NewSectionBlock(bkMrkdwn(cutText(text, MaxSectionText)), nil, nil)
}

// plainText is how text from data is shown in a plain_text object: inert
// (control, bidi and zero-width characters escaped and visible, one line).
func plainText(s string) string { return show.Inert(s) }

// mdEscape is how text from data is shown in mrkdwn: inert, and with &, <
// and > escaped, which Slack reads as markup (links, mentions). It is for
// signoff's own words and names from the config; text an agent wrote goes in
// the requester's block or in a code span (mdCode), where * and _ mean nothing.
func mdEscape(s string) string {
	return mdMarkup.Replace(show.Inert(s))
}

var mdMarkup = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// mdCode shows s literally in a code span, cut to max bytes before escaping:
// inert, so one value stays on one line, and with a backtick, which would
// end the span, swapped for a look-alike. Argument values and keys never
// hold one: show.Value writes it \u0060, so they read exactly.
func mdCode(s string, max int) string {
	if s == "" {
		return "` `"
	}
	return "`" + mdEscape(strings.ReplaceAll(cutText(s, max), "`", "ˋ")) + "`"
}

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// mention links a Slack user id; other ids (agents) are shown as code.
func mdMention(id, name string) string {
	if slackUserID.MatchString(id) {
		return "<@" + id + ">"
	}
	if name != "" {
		return mdCode(name, 80) + " (" + mdCode(id, 80) + ")"
	}
	return mdCode(id, 80)
}

func personText(p record.Person) string { return mdMention(p.ID, p.Name) }

// slackDate shows t in each reader's own time zone, with UTC as the fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// untilText is how long until t, or that it has passed.
func untilText(now, t time.Time) string {
	if now.IsZero() {
		return "deadline"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "passed " + spanText(-d) + " ago"
	}
	return "in " + spanText(d)
}

// agoText is how long ago t was.
func agoText(now, t time.Time) string {
	d := now.Sub(t)
	if d < time.Minute {
		return "just now"
	}
	return spanText(d) + " ago"
}

func spanText(d time.Duration) string {
	d = d.Round(time.Minute)
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%02dm", int(d.Hours()), m)
		}
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// truncate cuts s to at most max bytes on a rune boundary, ending in "…" when cut.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "…"
	cut := max - len(ell)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// joinBounded joins lines with newlines into at most max bytes. Lines that do
// not fit are dropped and counted in a last line made by more.
func cutLines(lines []string, max int, more func(n int) string) string {
	var b strings.Builder
	reserve := len(more(len(lines))) + 1
	for i, l := range lines {
		sep := ""
		if b.Len() > 0 {
			sep = "\n"
		}
		rest := len(lines) - i - 1
		if b.Len()+len(sep)+len(l) > max-reserve && !(rest == 0 && b.Len()+len(sep)+len(l) <= max) {
			if b.Len() == 0 {
				// Not even the first line fits: cut it instead of dropping it.
				b.WriteString(cutText(l, max-reserve))
				if rest > 0 {
					b.WriteString("\n" + more(rest))
				}
				return b.String()
			}
			b.WriteString(sep + more(len(lines)-i))
			return b.String()
		}
		b.WriteString(sep + l)
	}
	return b.String()
}
