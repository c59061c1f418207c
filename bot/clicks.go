package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// click is one button press on an approval message.
type click struct {
	ic      *Interaction
	ref     Ref
	who     record.Person
	channel string // where to tell the clicker why nothing changed; "" when nowhere
	digest  string
	// claim is the signed request the click came in, taken with the
	// decision (see serveClick); nil when it was claimed before handling.
	claim *record.SeenRequest
	log   *slog.Logger
}

func personOf(u *User) record.Person {
	name := u.Name
	if name == "" {
		name = u.Username
	}
	return record.Person{ID: u.ID, Name: cutText(name, 80)}
}

// blockAction handles a click on one of our buttons. Slack ignores the body
// of the answer to a block action, so every outcome is an empty 200, and a
// refusal is told to the clicker in an ephemeral message.
func (s *Server) blockAction(ctx context.Context, ic *Interaction, digest string) (Response, error) {
	if len(ic.Actions) != 1 {
		// A button press carries exactly one action; anything else is not ours.
		s.log.Debug("slack block action ignored", "actions", len(ic.Actions))
		return Response{}, nil
	}
	a := ic.Actions[0]
	switch a.ActionID {
	case ActionApprove, ActionReject, ActionEdit:
	case ActionAcknowledge:
		s.acknowledge(ctx, ic, a.Value)
		return Response{}, nil
	default:
		s.log.Debug("slack block action ignored", "action_id", clipErr(a.ActionID, 60))
		return Response{}, nil
	}
	c, err := s.newClick(ic, digest)
	if err != nil {
		return Response{}, err
	}
	switch a.ActionID {
	case ActionApprove:
		s.approve(ctx, c, c.log)
	case ActionReject:
		s.openReject(ctx, c, c.log)
	case ActionEdit:
		s.openEdit(ctx, c, c.log)
	}
	return Response{}, nil
}

// newClick is the click of ic's one action on one of our buttons.
func (s *Server) newClick(ic *Interaction, digest string) (*click, error) {
	a := ic.Actions[0]
	ref, err := ParseRef(a.Value)
	if err != nil {
		return nil, err
	}
	c := &click{ic: ic, ref: ref, who: personOf(ic.User), digest: digest}
	if ic.Container != nil {
		c.channel = ic.Container.ChannelID
	}
	if c.channel == "" && ic.Channel != nil {
		c.channel = ic.Channel.ID
	}
	c.log = s.log.With("run_id", ref.RunID, "request_id", ref.RequestID, "user_id", c.who.ID, "action_id", a.ActionID)
	return c, nil
}

// approveClickOf is the Approve click a signed interaction request carries,
// from our app and organisation, or nil for any other request (which is
// claimed and handled as every request is, and refused there when it is
// wrong). It only parses: nothing is counted or written.
func (s *Server) approveClickOf(raw []byte) *click {
	payload, err := InteractionPayload(raw)
	if err != nil {
		return nil
	}
	ic, err := ParseInteraction(payload)
	if err != nil || ic.Type != TypeBlockActions || len(ic.Actions) != 1 || ic.Actions[0].ActionID != ActionApprove ||
		s.origin.CheckInteraction(ic) != nil {
		return nil
	}
	c, err := s.newClick(ic, digest(raw))
	if err != nil {
		return nil
	}
	return c
}

// approve asks the engine to decide, and nothing else: Decide is the one
// check of a click (request, fingerprint, status, deadline, role,
// self-approval), and its refusal says what it found, which refusal words
// without reading the run again.
//
// With the click's claim, a copy of a click taken before decides nothing and
// is told nothing: approve returns the request as first taken.
func (s *Server) approve(ctx context.Context, c *click, log *slog.Logger) (first *record.SeenRequest) {
	run, err := s.eng.Decide(ctx, workflow.DecideInput{
		RunID: c.ref.RunID, RequestID: c.ref.RequestID, Fingerprint: c.ref.Fingerprint,
		Approver: c.who, Verdict: record.VerdictApprove, Via: record.ViaSlack, PayloadDigest: c.digest,
		Claim: c.claim,
	})
	var replayed *workflow.ReplayedError
	if c.claim != nil && errors.As(err, &replayed) {
		return replayed.First
	}
	if err != nil {
		s.tell(ctx, c, s.refusal(ctx, c.ref, err, log), log)
		return nil
	}
	// The engine left the run executing (or still waiting for more approvals);
	// a worker resumes it from the store. Nothing runs here.
	log.Info("slack approval recorded", "status", string(run.Status))
	return nil
}

func (s *Server) openReject(ctx context.Context, c *click, log *slog.Logger) {
	v, msg := s.lookup(ctx, c.ref, log)
	if msg == "" {
		msg = s.precheckRole(ctx, v, c.who.ID, log)
	}
	if msg != "" {
		s.tell(ctx, c, msg, log)
		return
	}
	s.openModal(ctx, c, rejectModal(v, c.ref), log)
}

func (s *Server) openEdit(ctx context.Context, c *click, log *slog.Logger) {
	v, msg := s.lookup(ctx, c.ref, log)
	if msg == "" && (v.Gate.Approval == nil || !v.Gate.Approval.Edit) {
		msg = fmt.Sprintf("Nothing changed: rule %s does not allow editing the arguments.", mdCode(v.Gate.Rule, 100))
	}
	if msg == "" {
		msg = s.precheckRole(ctx, v, c.who.ID, log)
	}
	if msg != "" {
		s.tell(ctx, c, msg, log)
		return
	}
	s.openModal(ctx, c, editModal(v, c.ref, Redactor(s.eng)), log)
}

// openModal opens a modal synchronously: the trigger id expires 3 seconds
// after the click, so it cannot wait for any queue.
func (s *Server) openModal(ctx context.Context, c *click, view slack.ModalViewRequest, log *slog.Logger) {
	if c.ic.TriggerID == "" {
		s.tell(ctx, c, "Nothing changed: Slack sent no trigger to open a form with. Use the buttons on the approval message.", log)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, slackCallTimeout)
	defer cancel()
	if err := s.slack.OpenView(ctx, c.ic.TriggerID, view); err != nil {
		log.Warn("slack views.open failed", "err", err)
		s.tell(context.WithoutCancel(ctx), c, "Nothing changed: Slack did not open the form ("+mdEscape(cutText(err.Error(), 200))+"). Click again.", log)
	}
}

// lookup reads the run a button names, for the form it opens, and checks
// the button is its current request with the same fingerprint, so that a
// stale button opens no form. The checks are the engine's: the run as read
// is put to workflow.CheckButton, whose refusal is worded as a click's.
// msg is what to tell the clicker when the button cannot act ("" when it can).
func (s *Server) lookup(ctx context.Context, ref Ref, log *slog.Logger) (v *workflow.RunView, msg string) {
	v, err := s.eng.Get(ctx, ref.RunID)
	if err == nil {
		err = workflow.CheckButton(v, ref.RequestID, ref.Fingerprint)
	}
	if err != nil {
		return nil, s.refusal(ctx, ref, err, log)
	}
	return v, ""
}

// decidedText says who decided a request first, and when.
func decidedText(status record.RequestStatus, by string, at *time.Time) string {
	var b strings.Builder
	b.WriteString("Nothing changed: this request was already " + mdEscape(string(status)))
	if by != "" {
		b.WriteString(" by " + mdMention(by, ""))
	}
	if at != nil && !at.IsZero() {
		b.WriteString(" " + slackDate(*at))
	}
	b.WriteString(".")
	return b.String()
}

// precheckRole spares a person without the role a form they could not
// submit. The engine decides; this only answers early.
func (s *Server) precheckRole(ctx context.Context, v *workflow.RunView, userID string, log *slog.Logger) string {
	if v.Gate == nil || v.Gate.Approval == nil {
		return ""
	}
	need := v.Gate.Approval.Role
	role, ok, err := s.dir.RoleOf(ctx, userID)
	switch {
	case err != nil:
		log.Warn("role lookup failed", "err", err)
		return "" // the engine will say
	case mayDecideEscalated(s.eng.Roles(), v, userID, role, ok):
		return "" // an escalation lets them decide
	case s.isDeputy(ctx, userID, ok && s.eng.Roles().AtLeast(role, need)):
		return "" // a delegation may let them: the engine says
	case v.Gate.Approval.Requirement != nil:
		return precheckComposite(s.eng.Roles(), v.Gate.Approval.Requirement, userID, role, ok)
	case !ok:
		return fmt.Sprintf("Nothing changed: you hold no signoff role; this needs %s or above.", mdEscape(need))
	case !s.eng.Roles().AtLeast(role, need):
		return fmt.Sprintf("Nothing changed: you are %s; this needs %s or above.", mdEscape(role), mdEscape(need))
	}
	return ""
}

// refusal turns an engine error into what the person is told.
func (s *Server) refusal(ctx context.Context, ref Ref, err error, log *slog.Logger) string {
	var r *record.RefusedError
	switch {
	case errors.As(err, &r):
		log.Info("slack decision refused", "code", r.Code, "reason", r.Msg)
		switch r.Code {
		case record.CodeNoRole, record.CodeSelfApproval:
			s.refused("role")
		case record.CodeStaleFingerprint:
			s.refused("fingerprint")
		case record.CodeExpired:
			s.refused("deadline")
		}
		switch r.Button {
		case record.ButtonOtherRun:
			return "Nothing changed: this button is not from an approval request of run " + mdCode(ref.RunID, 100) + "."
		case record.ButtonFingerprint:
			button, current := policy.DistinctFingerprints(ref.Fingerprint, r.Fingerprint)
			return fmt.Sprintf("Nothing changed: this button approves fingerprint %s, but the request is for %s. Use the current message.",
				mdCode(button, 70), mdCode(current, 70))
		case record.ButtonSuperseded:
			return "Nothing changed: the arguments were edited since this message was posted, so it asks for a new approval. Use the updated message."
		case record.ButtonReplaced:
			return "Nothing changed: this run asks for a newer approval. Use the updated message."
		}
		switch r.Code {
		case record.CodeAlreadyDecided:
			status := r.RequestStatus
			if status == "" {
				status = "decided"
			}
			var at *time.Time
			if !r.At.IsZero() {
				at = &r.At
			}
			return decidedText(status, r.By, at)
		case record.CodeIntegrity:
			return "Nothing changed: the run's stored state failed its integrity check and a person must look at it first."
		case record.CodeNotWaiting:
			if r.RunStatus != "" {
				return "Nothing to decide: the run is " + mdEscape(string(r.RunStatus)) + "."
			}
		case record.CodeAlreadyVoted:
			return "Nothing changed: you already decided this request " + slackDate(r.At) + "."
		case record.CodeUnknownRun:
			return "Nothing changed: there is no run " + mdCode(ref.RunID, 100) + "."
		case record.CodeExpired:
			return "Too late: " + mdEscape(r.Msg) + "."
		case record.CodeConfirmOnWeb:
			return confirmText(s.console, ref.RunID)
		}
		return "Nothing changed: " + mdEscape(r.Msg) + "."
	case errors.Is(err, ErrRoleLookup):
		log.Warn("slack decision refused: role lookup failed", "err", err)
		return "Nothing changed: signoff could not check your role with Slack just now. Try again in a minute."
	}
	log.Error("slack decision failed", "err", err)
	return "Nothing changed: signoff could not record your click (an internal error). If the message still shows its buttons, nothing was decided: try again."
}

// tell shows msg to the clicker only. A failure to tell is logged: the
// decision (or the refusal) stands either way.
func (s *Server) tell(ctx context.Context, c *click, msg string, log *slog.Logger) {
	if c.channel == "" {
		log.Warn("slack refusal not shown: no channel", "message", msg)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, slackCallTimeout)
	defer cancel()
	blocks := []slack.Block{bkSection(msg)}
	if err := s.slack.PostEphemeral(ctx, c.channel, c.who.ID, blocks, cutText(msg, MaxSectionText)); err != nil {
		log.Warn("slack chat.postEphemeral failed", "err", err)
	}
}

var (
	mdUserMention = regexp.MustCompile(`<@([A-Z0-9]+)(?:\|[^>]*)?>`)
	mdDate        = regexp.MustCompile(`<!date\^[^|>]*\|([^>]*)>`)
)

// mdToPlain turns the mrkdwn of a refusal into plain text, for modal errors.
func mdToPlain(md string) string {
	s := mdUserMention.ReplaceAllString(md, "@$1")
	s = mdDate.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "`", "")
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// modalErrors keeps a modal open with a message under one input.
func modalErrors(errs map[string]string) Response {
	for k, v := range errs {
		errs[k] = cutText(v, maxModalError)
	}
	return Response{Body: slack.NewErrorsViewSubmissionResponse(errs)}
}

func (s *Server) submitReject(ctx context.Context, ic *Interaction, digest string) (Response, error) {
	ref, err := ParseRef(ic.View.PrivateMetadata)
	if err != nil {
		return Response{}, err
	}
	who := personOf(ic.User)
	log := s.log.With("run_id", ref.RunID, "request_id", ref.RequestID, "user_id", who.ID, "callback_id", CallbackReject)
	reason := strings.TrimSpace(ic.View.State.Values[blockReason][inputReason].Value)
	if reason == "" {
		return modalErrors(map[string]string{blockReason: "Say why: the requester sees the reason."}), nil
	}
	if len(reason) > maxReason*4 {
		return modalErrors(map[string]string{blockReason: fmt.Sprintf("At most %d characters, please.", maxReason)}), nil
	}
	_, err = s.eng.Decide(ctx, workflow.DecideInput{
		RunID: ref.RunID, RequestID: ref.RequestID, Fingerprint: ref.Fingerprint, Approver: who,
		Verdict: record.VerdictReject, Reason: reason, Via: record.ViaSlack, PayloadDigest: digest,
	})
	if err != nil {
		return modalErrors(map[string]string{blockReason: mdToPlain(s.refusal(ctx, ref, err, log))}), nil
	}
	log.Info("slack rejection recorded")
	return Response{}, nil
}

func (s *Server) submitEdit(ctx context.Context, ic *Interaction, digest string) (Response, error) {
	ref, err := ParseRef(ic.View.PrivateMetadata)
	if err != nil {
		return Response{}, err
	}
	who := personOf(ic.User)
	log := s.log.With("run_id", ref.RunID, "request_id", ref.RequestID, "user_id", who.ID, "callback_id", CallbackEdit)
	state := ic.View.State.Values
	// Errors go under an input the modal has: the first action's, else the reason.
	first := blockReason
	for i := range maxActionSections {
		if _, ok := state[editBlockID(i)]; ok {
			first = editBlockID(i)
			break
		}
	}
	v, msg := s.lookup(ctx, ref, log)
	if msg != "" {
		return modalErrors(map[string]string{first: mdToPlain(msg)}), nil
	}
	type change struct {
		index int
		args  json.RawMessage
	}
	var changes []change
	errs := map[string]string{}
	for i, a := range v.Actions {
		id := editBlockID(i)
		in, ok := state[id][inputArgs]
		if !ok {
			continue // not editable in the modal
		}
		edited, err := jsonvalue.Canonical([]byte(strings.TrimSpace(in.Value)))
		if err != nil {
			errs[id] = "Not valid JSON: " + err.Error()
			continue
		}
		var redact []string
		if spec, ok := s.eng.Action(a.Name); ok {
			redact = spec.Redact
		}
		restored, err := RestoreRedacted(a.Args, edited, redact)
		if err != nil {
			errs[id] = err.Error()
			continue
		}
		orig, err := jsonvalue.Canonical(a.Args)
		if err != nil || !bytes.Equal(orig, restored) {
			changes = append(changes, change{i, restored})
		}
	}
	if len(errs) > 0 {
		return modalErrors(errs), nil
	}
	switch len(changes) {
	case 0:
		return modalErrors(map[string]string{first: "Nothing changed. To approve as proposed, use Approve on the message."}), nil
	case 1:
	default:
		return modalErrors(map[string]string{editBlockID(changes[1].index): "Edit one action at a time: submit this one after the first is approved."}), nil
	}
	ch := changes[0]
	_, err = s.eng.Decide(ctx, workflow.DecideInput{
		RunID: ref.RunID, RequestID: ref.RequestID, Fingerprint: ref.Fingerprint, Approver: who,
		Verdict: record.VerdictApprove, Reason: strings.TrimSpace(state[blockReason][inputReason].Value),
		Edit: ch.args, EditIndex: ch.index, Via: record.ViaSlack, PayloadDigest: digest,
	})
	if err != nil {
		return modalErrors(map[string]string{editBlockID(ch.index): mdToPlain(s.refusal(ctx, ref, err, log))}), nil
	}
	log.Info("slack edit recorded", "index", ch.index)
	return Response{}, nil
}
