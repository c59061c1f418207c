package slackdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// ErrNotSent wraps what stops a click or a command before anything is sent
// to serve: bad input, or no message of the run with the button asked for.
var ErrNotSent = errors.New("nothing sent")

// Workspace is the Slack app and organisation the requests come from: they
// must be the ones serve's config names (slack.app_id, slack.team_id,
// slack.enterprise_id), or serve refuses them as Slack's would be.
type Workspace struct {
	AppID, TeamID, EnterpriseID string
	Channel                     string // where slash commands are typed (slack.channel)
}

// Client sends serve what Slack would.
type Client struct {
	ServeURL string // serve's base URL, http://HOST:PORT
	SlackURL string // the local Slack's API URL (slack.api_url), for clicks
	Secret   string // the signing secret serve verifies with
	Space    Workspace
	HTTP     *http.Client
	Now      func() time.Time // the signing time; time.Now when nil
}

// Verbs are the buttons Click can press.
var Verbs = map[string]string{"approve": bot.ActionApprove, "reject": bot.ActionReject, "edit": bot.ActionEdit}

// Click is one button press by User on the message of Run, and for reject
// and edit the modal it opens, filled in and submitted.
type Click struct {
	Run, Verb, User string
	Reason          string // the reject modal's reason; the edit modal's optional one
	// Edit is a JSON object merged into the arguments the edit modal shows
	// (RFC 7386: a field set to null is removed), as a person edits the text.
	Edit   string
	Action int // which action's arguments Edit changes, from 1; 0 is 1
}

// Outcome is what serve made of a request, in lines for a person.
type Outcome struct {
	Lines []string
	// Refused: serve changed nothing and said why (an ephemeral message to
	// the clicker, errors on the modal).
	Refused bool
}

func (o *Outcome) say(format string, args ...any) {
	o.Lines = append(o.Lines, fmt.Sprintf(format, args...))
}

func notSent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotSent, fmt.Sprintf(format, args...))
}

// CheckClick refuses a click that cannot be sent, before anything is read.
func CheckClick(c Click) error {
	if _, ok := Verbs[c.Verb]; !ok {
		return notSent("no button %q: approve, reject or edit", c.Verb)
	}
	if strings.TrimSpace(c.Run) == "" || strings.TrimSpace(c.User) == "" {
		return notSent("a run and --as USER (a Slack user id, U…) are required")
	}
	if c.Edit != "" && c.Verb != "edit" {
		return notSent("--edit is for edit")
	}
	if c.Action < 0 {
		return notSent("--action counts from 1")
	}
	switch c.Verb {
	case "reject":
		if strings.TrimSpace(c.Reason) == "" {
			return notSent("reject needs --reason: the reject form asks why, and the requester sees it")
		}
	case "edit":
		var patch map[string]any
		if err := json.Unmarshal([]byte(c.Edit), &patch); err != nil || patch == nil {
			return notSent("edit needs --edit with a JSON object of the fields to change, e.g. --edit '{\"amount\": 60}'")
		}
	}
	return nil
}

// Click presses the button of the run's message as the local Slack holds it
// now, and for reject and edit fills in and submits the modal serve opens.
func (cl *Client) Click(ctx context.Context, c Click) (Outcome, error) {
	var out Outcome
	if err := CheckClick(c); err != nil {
		return out, err
	}
	st, err := fakeslack.ReadState(ctx, cl.HTTP, cl.SlackURL)
	if err != nil {
		return out, err
	}
	msg, actions, button, err := findButton(st, c.Run, Verbs[c.Verb])
	if err != nil {
		return out, err
	}
	label := button.label()
	payload, trigger, err := cl.blockActions(msg, actions, button, c.User)
	if err != nil {
		return out, err
	}
	out.say("clicked %s on the message of %s (%s ts %s) as %s", label, c.Run, msg.Channel, msg.TS, c.User)
	before := len(st.Ephemerals)
	if _, err := cl.post(ctx, "/slack/interactions", formPayload(payload)); err != nil {
		return out, err
	}
	st, err = fakeslack.ReadState(ctx, cl.HTTP, cl.SlackURL)
	if err != nil {
		return out, err
	}
	if told := toldUser(st, before, c.User); len(told) > 0 {
		out.Refused = true
		out.say("serve told %s:", c.User)
		out.Lines = append(out.Lines, indent(told)...)
		return out, nil
	}
	if c.Verb == "approve" {
		out.say("serve took the click: the approval is recorded, and serve updates the message")
		return out, nil
	}
	var view *fakeslack.View
	for i := range st.Views {
		if st.Views[i].TriggerID == trigger {
			view = &st.Views[i]
		}
	}
	if view == nil {
		return out, fmt.Errorf("serve took the %s click but opened no form (views.open was not called with its trigger): is serve's slack.api_url the local Slack's %s?", label, cl.SlackURL)
	}
	return cl.submit(ctx, c, view, out)
}

// findButton finds the latest message of the local Slack with a button of
// action for run, and that button's actions block.
func findButton(st fakeslack.State, run, action string) (fakeslack.Message, block, element, error) {
	for i := len(st.Messages) - 1; i >= 0; i-- {
		m := st.Messages[i]
		bs, err := parseBlocks(m.Blocks)
		if err != nil {
			continue
		}
		var labels []string
		for _, b := range bs {
			if b.Type != "actions" || buttonsRun(b) != run {
				continue
			}
			for _, e := range b.Elements {
				if e.Type == "button" && e.ActionID == action {
					return m, b, e, nil
				}
				labels = append(labels, e.label())
			}
		}
		if labels != nil {
			return fakeslack.Message{}, block{}, element{}, notSent("the message of %s (%s ts %s) has no such button; it has %s", run, m.Channel, m.TS, strings.Join(labels, ", "))
		}
	}
	return fakeslack.Message{}, block{}, element{}, notSent("the local Slack holds no message with buttons for %s (%d messages): is the run waiting for approval, and does serve's slack.api_url point at this local Slack?", run, len(st.Messages))
}

// toldUser is what the ephemeral messages to user after the first skip say.
func toldUser(st fakeslack.State, skip int, user string) []string {
	var lines []string
	for _, e := range st.Ephemerals[min(skip, len(st.Ephemerals)):] {
		if e.User == user {
			lines = append(lines, Render(e.Blocks, e.Text)...)
		}
	}
	return lines
}

func indent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "    " + l
	}
	return out
}

// The parts of a payload that say who and where, in Slack's shapes.
func (cl *Client) user(id string) map[string]any {
	team := cl.Space.TeamID
	if team == "" {
		// An org-wide install: the user's own workspace is one of the
		// organisation's, which the enterprise admits.
		team = fakeslack.Team
	}
	return map[string]any{"id": id, "username": id, "name": id, "team_id": team}
}

func (cl *Client) team() any {
	if cl.Space.TeamID == "" {
		return nil // org-wide installs send team: null
	}
	return map[string]any{"id": cl.Space.TeamID, "domain": "local"}
}

func (cl *Client) enterprise() any {
	if cl.Space.EnterpriseID == "" {
		return nil
	}
	return map[string]any{"id": cl.Space.EnterpriseID, "name": "local"}
}

func (cl *Client) orgWide() bool { return cl.Space.TeamID == "" }

// verificationToken stands for the token Slack puts in every payload, which
// signoff (as Slack advises) does not read: the signature is what counts.
const verificationToken = "local0verification0token"

// blockActions is the block_actions payload of a click on button of the
// actions block ab of msg, and its trigger id.
func (cl *Client) blockActions(msg fakeslack.Message, ab block, button element, user string) (map[string]any, string, error) {
	var blocks json.RawMessage = []byte(msg.Blocks)
	if !json.Valid(blocks) {
		return nil, "", notSent("the message's blocks are not JSON")
	}
	now := cl.now()
	trigger := newTrigger(now)
	action := map[string]any{
		"action_id": button.ActionID, "block_id": ab.BlockID, "text": button.Text, "value": button.Value,
		"type": "button", "action_ts": actionTS(now),
	}
	if button.Style != "" {
		action["style"] = button.Style
	}
	if len(button.Confirm) > 0 {
		action["confirm"] = button.Confirm
	}
	return map[string]any{
		"type":       bot.TypeBlockActions,
		"user":       cl.user(user),
		"api_app_id": cl.Space.AppID,
		"token":      verificationToken,
		"container": map[string]any{
			"type": "message", "message_ts": msg.TS, "channel_id": msg.Channel, "is_ephemeral": false,
		},
		"trigger_id":            trigger,
		"team":                  cl.team(),
		"enterprise":            cl.enterprise(),
		"is_enterprise_install": cl.orgWide(),
		"channel":               map[string]any{"id": msg.Channel, "name": "approvals"},
		"message": map[string]any{
			"bot_id": "B0SIGNOFF1", "type": "message", "text": msg.Text, "user": fakeslack.Bot, "ts": msg.TS,
			"app_id": cl.Space.AppID, "blocks": blocks, "team": cl.Space.TeamID,
			"bot_profile": map[string]any{"id": "B0SIGNOFF1", "deleted": false, "name": "signoff", "updated": now.Unix(),
				"app_id": cl.Space.AppID, "team_id": cl.Space.TeamID},
		},
		"state":        map[string]any{"values": map[string]any{}},
		"response_url": "https://hooks.slack.com/actions/" + cl.Space.TeamID + "/local/" + trigger,
		"actions":      []any{action},
	}, trigger, nil
}

// modal is the part of a view that a submission echoes (as it was sent) and fills in.
type modal struct {
	Type            string          `json:"type"`
	Title           json.RawMessage `json:"title"`
	Submit          json.RawMessage `json:"submit"`
	Close           json.RawMessage `json:"close"`
	Blocks          json.RawMessage `json:"blocks"`
	PrivateMetadata string          `json:"private_metadata"`
	CallbackID      string          `json:"callback_id"`
}

func parseView(raw string) (modal, error) {
	var m modal
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return m, fmt.Errorf("the view is not JSON: %w", err)
	}
	for _, f := range []*json.RawMessage{&m.Title, &m.Submit, &m.Close, &m.Blocks} {
		if len(*f) == 0 {
			*f = json.RawMessage("null")
		}
	}
	return m, nil
}

// text is what a text object (a modal's title, its submit button) says.
func text(raw json.RawMessage) string {
	var o textObj
	_ = json.Unmarshal(raw, &o) // "" for none
	return o.Text
}

// reasonBlock is the block id of the reason input of signoff's modals.
const reasonBlock = "reason"

// submit fills in the modal serve opened and submits it, as Slack does when
// the person presses its submit button.
func (cl *Client) submit(ctx context.Context, c Click, v *fakeslack.View, out Outcome) (Outcome, error) {
	m, err := parseView(v.View)
	if err != nil {
		return out, err
	}
	bs, err := parseBlocks(string(m.Blocks))
	if err != nil {
		return out, err
	}
	out.say("the form %q opened (%s)", text(m.Title), v.ID)
	values := map[string]any{}
	argInputs := 0
	want := max(c.Action, 1)
	edited := false
	for _, b := range bs {
		if b.Type != "input" || b.Element == nil {
			continue
		}
		var value any // null: an input left empty, as Slack sends it
		if b.Element.InitialValue != nil {
			value = *b.Element.InitialValue
		}
		switch {
		case b.BlockID == reasonBlock:
			if c.Reason != "" {
				value = c.Reason
				out.say("typed the reason: %s", c.Reason)
			}
		case c.Edit != "":
			if argInputs++; argInputs != want {
				break
			}
			initial, _ := value.(string)
			merged, err := mergePatch(initial, c.Edit)
			if err != nil {
				return out, notSent("the form's arguments of action %d: %v", want, err)
			}
			value, edited = merged, true
			label := ""
			if b.Label != nil {
				label = b.Label.Text
			}
			out.say("changed the arguments of %s to:", label)
			out.Lines = append(out.Lines, indent(splitLines(merged))...)
		}
		values[b.BlockID] = map[string]any{b.Element.ActionID: map[string]any{"type": b.Element.Type, "value": value}}
	}
	if c.Edit != "" && !edited {
		return out, notSent("the form has %d arguments to edit, not an action %d", argInputs, want)
	}
	team := cl.Space.TeamID
	now := cl.now()
	view := map[string]any{
		"id": v.ID, "team_id": team, "type": m.Type, "blocks": m.Blocks, "private_metadata": m.PrivateMetadata,
		"callback_id": m.CallbackID, "state": map[string]any{"values": values}, "hash": fmt.Sprintf("%d.local", now.Unix()),
		"title": m.Title, "clear_on_close": false, "notify_on_close": false, "close": m.Close, "submit": m.Submit,
		"previous_view_id": nil, "root_view_id": v.ID, "app_id": cl.Space.AppID, "external_id": "",
		"app_installed_team_id": team, "bot_id": "B0SIGNOFF1",
	}
	payload := map[string]any{
		"type": bot.TypeViewSubmission, "team": cl.team(), "user": cl.user(c.User), "api_app_id": cl.Space.AppID,
		"token": verificationToken, "trigger_id": newTrigger(now), "view": view, "response_urls": []any{},
		"is_enterprise_install": cl.orgWide(), "enterprise": cl.enterprise(),
	}
	out.say("pressed %s", text(m.Submit))
	body, err := cl.post(ctx, "/slack/interactions", formPayload(payload))
	if err != nil {
		return out, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		out.say("serve took it: the form closed, and serve updates the message")
		return out, nil
	}
	var answer struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.ResponseAction != "errors" {
		return out, fmt.Errorf("serve answered the form with %q, which Slack would not understand", clip(string(body), 200))
	}
	out.Refused = true
	out.say("the form stays open; serve says:")
	for _, b := range bs { // in the form's order
		if msg, ok := answer.Errors[b.BlockID]; ok {
			out.say("    %s: %s", b.BlockID, msg)
		}
	}
	return out, nil
}

// mergePatch applies the JSON object patch to the JSON object initial (RFC
// 7386) and returns it indented as the form shows it. Numbers stay as written.
func mergePatch(initial, patch string) (string, error) {
	var doc, p any
	if err := decodeNumbers(initial, &doc); err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	if err := decodeNumbers(patch, &p); err != nil {
		return "", fmt.Errorf("--edit is not JSON: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(merge(doc, p)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func merge(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = merge(dm[k], v)
	}
	return dm
}

func decodeNumbers(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// Command types line (the slash command and what follows it, "/runs
// pending") as user in the workspace's channel, and returns serve's answer,
// which only that user would see.
func (cl *Client) Command(ctx context.Context, line, user string) (Outcome, error) {
	var out Outcome
	name, text, _ := strings.Cut(strings.TrimSpace(line), " ")
	if !strings.HasPrefix(name, "/") || len(name) < 2 {
		return out, notSent("a slash command starts with its name, like '/runs pending'")
	}
	if strings.TrimSpace(user) == "" {
		return out, notSent("--as USER (a Slack user id, U…) is required")
	}
	now := cl.now()
	// The fields in the order Slack sends them.
	fields := [][2]string{
		{"token", verificationToken}, {"team_id", cl.Space.TeamID}, {"team_domain", "local"},
	}
	if cl.Space.EnterpriseID != "" {
		fields = append(fields, [2]string{"enterprise_id", cl.Space.EnterpriseID}, [2]string{"enterprise_name", "local"})
	}
	if cl.Space.TeamID == "" {
		fields[1][1] = fakeslack.Team
	}
	fields = append(fields,
		[2]string{"channel_id", cl.Space.Channel}, [2]string{"channel_name", "approvals"},
		[2]string{"user_id", user}, [2]string{"user_name", user}, [2]string{"command", name}, [2]string{"text", strings.TrimSpace(text)},
		[2]string{"api_app_id", cl.Space.AppID}, [2]string{"is_enterprise_install", fmt.Sprint(cl.orgWide())},
		[2]string{"response_url", "https://hooks.slack.com/commands/" + cl.Space.TeamID + "/local/" + newTrigger(now)},
		[2]string{"trigger_id", newTrigger(now)},
	)
	var form strings.Builder
	for i, f := range fields {
		if i > 0 {
			form.WriteByte('&')
		}
		form.WriteString(f[0] + "=" + url.QueryEscape(f[1]))
	}
	body, err := cl.post(ctx, "/slack/commands", []byte(form.String()))
	if err != nil {
		return out, err
	}
	var reply struct {
		Text   string          `json:"text"`
		Blocks json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return out, fmt.Errorf("serve answered %s with %q, which Slack would not show", name, clip(string(body), 200))
	}
	blocks := ""
	if len(reply.Blocks) > 0 {
		blocks = string(reply.Blocks)
	}
	out.say("serve answered %s (only %s sees it):", strings.TrimSpace(name+" "+strings.TrimSpace(text)), user)
	out.Lines = append(out.Lines, indent(Render(blocks, reply.Text))...)
	return out, nil
}

// post sends body to serve at path, signed now, and returns the answer's
// body; any status but 200 is an error, as Slack would show one.
func (cl *Client) post(ctx context.Context, path string, body []byte) ([]byte, error) {
	base := strings.TrimSuffix(cl.ServeURL, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("send to serve: %w", err)
	}
	req.Header = bot.SignedHeader(cl.Secret, cl.now().Unix(), body)
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("send to serve at %s: %w", base, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read serve's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (is SLACK_SIGNING_SECRET the one serve has?)"
		}
		if resp.StatusCode == http.StatusForbidden {
			hint = " (does the config name the app and team serve's does?)"
		}
		return nil, fmt.Errorf("serve at %s answered %s%s: %s", base, resp.Status, hint, clip(strings.TrimSpace(string(answer)), 300))
	}
	return answer, nil
}

func (cl *Client) now() time.Time {
	if cl.Now != nil {
		return cl.Now()
	}
	return time.Now()
}

// formPayload is an interaction as Slack posts it: payload=<JSON>.
func formPayload(payload map[string]any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(payload) // maps, strings and raw JSON that was checked
	return []byte("payload=" + url.QueryEscape(strings.TrimSuffix(b.String(), "\n")))
}

// newTrigger is a trigger id in Slack's shape, new for every request, so
// that two clicks are two requests and never one sent twice.
func newTrigger(now time.Time) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%d.%d.%s", now.UnixMicro()%1e13, 4471802230, hex.EncodeToString(b))
}

func actionTS(now time.Time) string {
	return fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
