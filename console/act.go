package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// maxNote bounds the receipt note of a resolution.
const maxNote = 4 << 10

// readOnlyRefusal is what a decision posted to a read-only console is told.
const readOnlyRefusal = "this console is read-only (ui.read_only): decide in Slack or with the signoff command"

// edit approves the arguments of one action as the edit form changed
// them, through the engine's Decide with Edit, as Slack's edit modal does:
// the edit is validated, checked, fingerprinted and put through policy
// again, and a form on a proposal that changed since is refused as stale.
func (c *Console) edit(w http.ResponseWriter, r *http.Request, se *session) {
	if !c.allowedToDecide(w, r, se) {
		return
	}
	id := r.PathValue("id")
	if r.PostFormValue("request_id") == "" || r.PostFormValue("fingerprint") == "" {
		c.showRun(w, r, se, http.StatusBadRequest, "", "the form lacks the request and fingerprint of the page it was sent from; edit from the run's page")
		return
	}
	v, ok := c.loadRun(w, r, se, id)
	if !ok {
		return
	}
	if !editable(v.Gate) {
		c.showRun(w, r, se, http.StatusConflict, "", "Nothing changed: this run's rule does not allow editing the arguments.")
		return
	}
	index, err := strconv.Atoi(r.PostFormValue("index"))
	if err != nil || index < 0 || index >= len(v.Actions) {
		c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: the form names no action of this run.")
		return
	}
	f := c.editFormFor(index, v.Actions[index])
	args, err := editedArgs(f, v.Actions[index].Args, r.PostForm)
	if err != nil {
		c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: "+err.Error())
		return
	}
	if orig, err := jsonvalue.Canonical(v.Actions[index].Args); err == nil && bytes.Equal(orig, args) {
		c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: the form has the arguments as proposed. To approve them as they are, use Approve.")
		return
	}
	_, err = c.eng.Decide(r.Context(), workflow.DecideInput{RunID: id, RequestID: r.PostFormValue("request_id"),
		Fingerprint: r.PostFormValue("fingerprint"), Approver: record.Person{ID: se.Who.Member}, Verdict: record.VerdictApprove,
		Reason: strings.TrimSpace(r.PostFormValue("reason")), Edit: args, EditIndex: index, Via: record.ViaWeb, AuthTime: se.Who.AuthTime})
	if c.refused(w, r, se, id, "console edit refused", err) {
		return
	}
	c.log.Info("console edit", "run_id", id, "member", se.Who.Member, "index", index)
	http.Redirect(w, r, c.cfg.Prefix+"/runs/"+id+"?done=edit", http.StatusSeeOther)
}

// editFormFor is action a's edit form, by its schema and redactions.
func (c *Console) editFormFor(index int, a record.Action) editForm {
	var schema json.RawMessage
	var redact []string
	if spec, ok := c.eng.Action(a.Name); ok && spec.ActionSpec != nil {
		schema, redact = spec.Schema, spec.Redact
	}
	return editFormOf(index, a.Name, schema, a.Args, redact)
}

// resolutionOf is the resolution a resolve form's button asks for.
var resolutionOf = map[string]record.Resolution{
	"ran": record.ResolveHappened, "retry": record.ResolveRetry, "abandon": record.ResolveAbandon,
}

// resolve ends a run's stay in needs_attention as the person found it,
// through the engine's Resolve as signoff resolve does: it ran (with an
// optional note kept in its receipt), or it did not and is tried again
// under the same key or given up. The engine checks the resolve role.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request, se *session) {
	if !c.allowedToDecide(w, r, se) {
		return
	}
	id := r.PathValue("id")
	choice, ok := resolutionOf[r.PostFormValue("outcome")]
	if !ok {
		c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: say whether it ran, or did not (and is tried again or given up).")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: a resolution needs a reason: say what you checked at the target.")
		return
	}
	in := workflow.ResolveInput{RunID: id, By: record.Person{ID: se.Who.Member}, Choice: choice, Reason: reason, Via: string(record.ViaWeb)}
	if note := strings.TrimSpace(r.PostFormValue("note")); note != "" {
		if choice != record.ResolveHappened {
			c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: a receipt note says what happened, so it goes only with “it ran”.")
			return
		}
		if len(note) > maxNote {
			c.showRun(w, r, se, http.StatusBadRequest, "", "Nothing changed: the receipt note is too long (at most 4 KiB).")
			return
		}
		b, err := json.Marshal(map[string]string{"note": note})
		if err != nil {
			c.fail(w, r, err)
			return
		}
		in.Receipt = b
	}
	_, err := c.eng.Resolve(r.Context(), in)
	if c.refused(w, r, se, id, "console resolution refused", err) {
		return
	}
	c.log.Info("console resolution", "run_id", id, "member", se.Who.Member, "choice", string(choice))
	http.Redirect(w, r, c.cfg.Prefix+"/runs/"+id+"?done=resolve", http.StatusSeeOther)
}

// refused answers err when there is one: a refusal on the run page in
// words, anything else as a failure. It says whether it answered.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, se *session, id, what string, err error) bool {
	var ref *record.RefusedError
	switch {
	case errors.As(err, &ref):
		c.log.Info(what, "run_id", id, "member", se.Who.Member, "code", ref.Code)
		c.showRun(w, r, se, refusalStatus(ref.Code), "", refusalWords(ref))
		return true
	case err != nil:
		c.fail(w, r, err)
		return true
	}
	return false
}

// slackLink is where one of the run's requests was posted in Slack.
type slackLink struct {
	RequestID, Channel, TS string
	URL                    string // "" when channel or ts are not of Slack's form
}

// slackIDs are the characters of Slack's channel ids and message ts.
var (
	slackChannel = regexp.MustCompile(`^[A-Z0-9]{1,40}$`)
	slackTS      = regexp.MustCompile(`^[0-9]{1,20}\.[0-9]{1,10}$`)
)

// slackLinks are the requests of v that have a message posted, each with
// a link in the form Slack's own links take (the ts without its dot);
// Slack sends whoever follows it to their workspace.
func slackLinks(v *workflow.RunView) []slackLink {
	var out []slackLink
	for _, rq := range v.Requests {
		if rq.Channel == "" || rq.MessageTS == "" {
			continue
		}
		l := slackLink{RequestID: rq.ID, Channel: rq.Channel, TS: rq.MessageTS}
		if slackChannel.MatchString(rq.Channel) && slackTS.MatchString(rq.MessageTS) {
			l.URL = "https://slack.com/archives/" + rq.Channel + "/p" + strings.ReplaceAll(rq.MessageTS, ".", "")
		}
		out = append(out, l)
	}
	return out
}
