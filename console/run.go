package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// runData is the Run page.
type runData struct {
	V          *workflow.RunView
	Timeline   []eventRow
	Args       []actionArgs
	Evidence   []evidenceRow
	Operations []opRow
	Verify     verifyResult
	Pending    *workflow.RequestView // the request a decision answers, nil when none waits
	MayDecide  bool
	Reason     string // the reason the refused form was sent with
	// Edits are the edit forms of the actions, when the pending request's
	// rule allows editing.
	Edits []editForm
	// Resolve offers the resolution form: the run needs attention.
	Resolve bool
	Slack   []slackLink
	// StepUp is how recent a sign-in the rule asks of an approval ("" for
	// none), and SignInAgain the login that renews it, offered when the
	// engine refused an approval for an older sign-in.
	StepUp      string
	SignInAgain string
}

// eventRow is one audit event of the run: what, who, when, its hashes.
type eventRow struct {
	Seq      int64
	At       string
	Actor    string
	Event    string
	Detail   string
	Hash     string
	PrevHash string
}

// actionArgs are one action's arguments as proposed, as edited and as
// executed, field by field.
type actionArgs struct {
	Name     string
	Edited   bool // an approver edited the arguments
	Executed bool // the operations ran with them
	Fields   []argRow
}

type argRow struct {
	Key                        string
	Proposed, Edited, Executed string
	Changed                    bool // edited or executed differ from proposed
}

type evidenceRow struct{ Source, Data string }

type opRow struct {
	Key, Action, Status, Receipt, Error string
	Attempts                            int
}

// verifyResult is what checking this run found: its checkpoint chain, the
// seals of its records, each checkpoint on its own.
type verifyResult struct {
	OK       bool
	Problems []string
	Checked  int // checkpoints
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, se *session) {
	notice := map[string]string{"approve": "Your approval was recorded.", "reject": "Your rejection was recorded.",
		"edit": "Your edit and approval were recorded.", "resolve": "Your resolution was recorded."}[r.URL.Query().Get("done")]
	c.showRun(w, r, se, http.StatusOK, notice, "")
}

// signInAgain is the login that renews a sign-in for a step-up rule and
// comes back to run id: prompt=login and max_age ask an identity provider
// for a fresh authentication; the local login is always fresh.
func (c *Console) signInAgain(id string, maxAge record.Seconds) string {
	q := url.Values{"next": {c.cfg.Prefix + "/runs/" + id}, "prompt": {"login"}, "max_age": {strconv.FormatInt(int64(maxAge), 10)}}
	return c.cfg.Prefix + "/login?" + q.Encode()
}

// showRun renders the run page with status, a notice of what was just
// done or a problem saying why it was refused.
// loadRun reads run id for a page, answering 404 for a run that does not
// exist and the failure for any other error; false when it answered.
func (c *Console) loadRun(w http.ResponseWriter, r *http.Request, se *session, id string) (*workflow.RunView, bool) {
	v, err := c.eng.Get(r.Context(), id)
	if record.IsRefused(err, record.CodeUnknownRun) {
		c.problem(w, r, se, http.StatusNotFound, "no run "+show.String(id))
		return nil, false
	}
	if err != nil {
		c.fail(w, r, err)
		return nil, false
	}
	return v, true
}

func (c *Console) showRun(w http.ResponseWriter, r *http.Request, se *session, status int, notice, problem string) {
	id := r.PathValue("id")
	ctx := r.Context()
	v, ok := c.loadRun(w, r, se, id)
	if !ok {
		return
	}
	stored := v.Actions // unredacted: the edit forms keep redacted fields out of reach themselves
	v = c.eng.Redacted(v)
	hist, err := c.eng.History(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	evs, err := c.eng.AuditLog(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := runData{V: v, Timeline: timeline(evs), Args: argsOf(v, hist, c.eng.Redacted), Verify: verifyOf(v, hist),
		Reason: r.PostFormValue("reason"), Slack: slackLinks(v), Resolve: v.Status == record.StatusNeedsAttention && !c.cfg.ReadOnly}
	for _, e := range v.Evidence {
		d.Evidence = append(d.Evidence, evidenceRow{Source: e.Source, Data: show.Value(e.Data)})
	}
	for _, op := range v.Operations {
		row := opRow{Key: op.Key, Action: op.Action, Status: string(op.Status), Attempts: op.Attempts, Error: op.Error}
		if len(op.Receipt) > 0 {
			row.Receipt = show.Value(op.Receipt)
		}
		d.Operations = append(d.Operations, row)
	}
	if v.Status == record.StatusWaitingApproval {
		for i := range v.Requests {
			if v.Requests[i].Status == record.RequestPending {
				d.Pending = &v.Requests[i]
			}
		}
	}
	if d.Pending != nil && v.Gate != nil && v.Gate.Approval != nil {
		d.MayDecide = c.mayDecide(se.Who.Member, v)
		if editable(v.Gate) && !c.cfg.ReadOnly {
			for i, a := range stored {
				d.Edits = append(d.Edits, c.editFormFor(i, a))
			}
		}
		if a := v.Gate.Approval; a.StepUp > 0 {
			d.StepUp = show.Duration(a.StepUp.Duration())
			if status == http.StatusForbidden && strings.HasPrefix(problem, stepUpLead) {
				d.SignInAgain = c.signInAgain(v.ID, a.StepUp)
			}
		}
	}
	p := c.newPage(se, "Run "+v.ID, d)
	p.Notice, p.Problem = notice, problem
	c.render(w, r, status, "run", p)
}

func timeline(evs []*record.AuditEvent) []eventRow {
	out := make([]eventRow, 0, len(evs))
	for _, e := range evs {
		row := eventRow{Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339), Actor: e.Actor, Event: string(e.Action), Hash: e.Hash, PrevHash: e.PrevHash}
		if len(e.Detail) > 0 {
			row.Detail = show.Value(e.Detail)
		}
		out = append(out, row)
	}
	return out
}

// argsOf lines up each action's arguments as first proposed (the oldest
// checkpoint that has actions), as edited (the run's, when an approver
// edited) and as executed (the run's, once operations exist), redacted as
// approvers see them.
func argsOf(v *workflow.RunView, hist []workflow.HistoryEntry, redact func(*workflow.RunView) *workflow.RunView) []actionArgs {
	proposed := v.Actions
	for _, h := range hist {
		if h.State != nil && len(h.State.Actions) > 0 {
			proposed = redact(&workflow.RunView{Actions: h.State.Actions}).Actions
			break
		}
	}
	edited := slices.ContainsFunc(v.Decisions, func(d workflow.DecisionView) bool { return len(d.Edited) > 0 })
	executed := len(v.Operations) > 0
	out := make([]actionArgs, 0, len(v.Actions))
	for i, a := range v.Actions {
		var from json.RawMessage
		if i < len(proposed) {
			from = proposed[i].Args
		}
		out = append(out, actionArgs{Name: a.Name, Edited: edited, Executed: executed, Fields: argRows(from, a.Args, edited, executed)})
	}
	return out
}

// argRows is the union of the fields of from (as proposed) and now (as
// the run has them), each value shown by package show.
func argRows(from, now json.RawMessage, edited, executed bool) []argRow {
	pf, _ := show.Fields(from)
	nf, ok := show.Fields(now)
	if !ok {
		// Not an object: the whole value is one row.
		return []argRow{fill(argRow{Key: "(value)", Proposed: show.Value(from)}, show.Value(now), edited, executed)}
	}
	byKey := map[string]*argRow{}
	var rows []*argRow
	for _, f := range pf {
		r := &argRow{Key: f.Key, Proposed: f.Value}
		byKey[f.Key] = r
		rows = append(rows, r)
	}
	seen := map[string]bool{}
	for _, f := range nf {
		r, ok := byKey[f.Key]
		if !ok {
			r = &argRow{Key: f.Key, Proposed: "(absent)"}
			rows = append(rows, r)
		}
		seen[f.Key] = true
		*r = fill(*r, f.Value, edited, executed)
	}
	out := make([]argRow, len(rows))
	for i, r := range rows {
		if !seen[r.Key] {
			*r = fill(*r, "(removed)", edited, executed)
		}
		out[i] = *r
	}
	return out
}

func fill(r argRow, now string, edited, executed bool) argRow {
	if edited {
		r.Edited = now
	}
	if executed {
		r.Executed = now
	}
	r.Changed = (edited || executed) && now != r.Proposed
	return r
}

func verifyOf(v *workflow.RunView, hist []workflow.HistoryEntry) verifyResult {
	res := verifyResult{Checked: len(hist)}
	if v.Problem != "" {
		res.Problems = append(res.Problems, v.Problem)
	}
	for _, h := range hist {
		if h.Problem != "" && !slices.Contains(res.Problems, h.Problem) {
			res.Problems = append(res.Problems, h.Problem)
		}
	}
	res.OK = len(res.Problems) == 0
	return res
}

// decide takes a decision through the engine's Decide, bound to the
// request and fingerprint the page showed: a proposal changed since is
// refused as stale, and every refusal is shown in words on the run page.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, se *session) {
	if !c.allowedToDecide(w, r, se) {
		return
	}
	verdict := record.Verdict(r.PostFormValue("verdict"))
	if verdict != record.VerdictApprove && verdict != record.VerdictReject {
		c.showRun(w, r, se, http.StatusBadRequest, "", "choose approve or reject")
		return
	}
	if r.PostFormValue("request_id") == "" || r.PostFormValue("fingerprint") == "" {
		// Without them the engine would decide whatever the run asks now,
		// which may not be what this person read.
		c.showRun(w, r, se, http.StatusBadRequest, "", "the form lacks the request and fingerprint of the page it was sent from; decide from the run's page")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if verdict == record.VerdictReject && reason == "" {
		c.showRun(w, r, se, http.StatusBadRequest, "", "a rejection needs a reason: say why, for the requester")
		return
	}
	id := r.PathValue("id")
	_, err := c.eng.Decide(r.Context(), workflow.DecideInput{RunID: id, RequestID: r.PostFormValue("request_id"),
		Fingerprint: r.PostFormValue("fingerprint"), Approver: record.Person{ID: se.Who.Member}, Verdict: verdict,
		Reason: reason, Via: record.ViaWeb, AuthTime: se.Who.AuthTime})
	if c.refused(w, r, se, id, "console decision refused", err) {
		return
	}
	c.log.Info("console decision", "run_id", id, "member", se.Who.Member, "verdict", string(verdict))
	http.Redirect(w, r, c.cfg.Prefix+"/runs/"+id+"?done="+string(verdict), http.StatusSeeOther)
}

// allowedToDecide refuses (403) a decision, an edit or a resolution on a
// read-only console or from a login no member maps to, saying why.
func (c *Console) allowedToDecide(w http.ResponseWriter, r *http.Request, se *session) bool {
	switch {
	case c.cfg.ReadOnly:
		c.problem(w, r, se, http.StatusForbidden, readOnlyRefusal)
	case se.Who.Member == "":
		c.problem(w, r, se, http.StatusForbidden, "you are signed in as "+show.Inert(se.Who.label())+
			", which ui.members maps to no member of the roles: you may read and not decide")
	default:
		return true
	}
	return false
}

// refusalStatus is the HTTP status a refusal is shown with: 403 when who
// decides may not, 404 for a run that does not exist, 409 when the run is
// not as the page showed it.
func refusalStatus(code string) int {
	switch code {
	case record.CodeNoRole, record.CodeSelfApproval, record.CodeSignInAgain:
		return http.StatusForbidden
	case record.CodeUnknownRun:
		return http.StatusNotFound
	case record.CodeInvalidInput:
		return http.StatusBadRequest
	}
	return http.StatusConflict
}

// stepUpLead leads the refusal of an approval for too old a sign-in; the
// page then offers the login that renews it.
const stepUpLead = "This rule asks for a recent sign-in to approve: sign in again, then approve."

// refusalWords says a refusal as a person reads it.
func refusalWords(r *record.RefusedError) string {
	lead := map[string]string{
		record.CodeNoRole:           "You may not decide this run: your role is not one the rule asks for.",
		record.CodeSelfApproval:     "You may not approve your own request: the rule asks for someone else.",
		record.CodeStaleFingerprint: "The proposal changed after this page was shown: read it again below before deciding.",
		record.CodeExpired:          "The deadline passed: the run has expired.",
		record.CodeNotWaiting:       "The run is no longer waiting for a decision.",
		record.CodeAlreadyDecided:   "Someone decided this request first.",
		record.CodeAlreadyVoted:     "You have already decided this request.",
		record.CodeSignInAgain:      stepUpLead,
	}[r.Code]
	msg := show.Inert(r.Msg)
	if lead == "" {
		return "Refused: " + msg
	}
	return lead + " (" + msg + ")"
}
