package bot

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json"
)

// MaxPayload bounds the JSON of one interaction. A click carries the whole
// message it came from, and the longest message signoff renders stays far
// below this (a test checks it).
const MaxPayload = 256 << 10

// DefaultMaxBody is the body limit when ServerConfig.MaxBody is 0: a click
// carries the whole message it came from, form-encoded.
const DefaultMaxBody = 512 << 10

// Request-level refusals: the request itself is wrong, so no person is told
// anything and the HTTP answer says so (400, 403, 408, 413).
var (
	// ErrMalformed: the body or payload does not parse strictly.
	ErrMalformed = errors.New("malformed slack request")
	// ErrForbidden: the request is for another app or from another organisation.
	ErrForbidden = errors.New("slack request not for this app or organisation")
	// ErrTooLarge: the body is over the size limit.
	ErrTooLarge = errors.New("slack request too large")
	// ErrBodyTimeout: the body did not arrive within the server's read
	// timeout (a client that stalled), answered 408: the client's doing, not
	// the server's failure.
	ErrBodyTimeout = errors.New("slack request body not received in time")
)

// The interaction types signoff handles; Slack sends others (shortcuts,
// view_closed) that it acknowledges and ignores.
const (
	TypeBlockActions   = "block_actions"
	TypeViewSubmission = "view_submission"
)

// The action_ids of the buttons on an approval message, and the callback_ids of
// the modals they open.
const (
	ActionApprove = "signoff_approve"
	ActionReject  = "signoff_reject"
	ActionEdit    = "signoff_edit"

	CallbackReject = "signoff_reject"
	CallbackEdit   = "signoff_edit"
)

// Interaction is the part of an interaction payload (block_actions,
// view_submission) that signoff reads. It is decoded strictly: duplicate keys,
// invalid UTF-8 and wrong types are refused. Unknown fields are ignored because
// Slack adds fields over time.
type Interaction struct {
	Type     string `json:"type"`
	APIAppID string `json:"api_app_id"`
	User     *User  `json:"user"`
	// Team is null for org-wide installs; in a shared channel it can be the
	// other organisation. Never decide who someone is from it.
	Team                *Team       `json:"team"`
	Enterprise          *Enterprise `json:"enterprise"`
	IsEnterpriseInstall bool        `json:"is_enterprise_install"`
	TriggerID           string      `json:"trigger_id"`
	ResponseURL         string      `json:"response_url"`
	Container           *Container  `json:"container"`
	Channel             *Channel    `json:"channel"`
	Actions             []Action    `json:"actions"`
	View                *View       `json:"view"`
}

// User is who clicked: the only identity fields trusted are ID and TeamID.
type User struct {
	ID       string `json:"id"`
	TeamID   string `json:"team_id"`
	Name     string `json:"name"`
	Username string `json:"username"`
}

// Team is the workspace the interaction happened in.
type Team struct {
	ID           string `json:"id"`
	EnterpriseID string `json:"enterprise_id"`
}

// Enterprise is the Enterprise Grid organisation, when there is one.
type Enterprise struct {
	ID string `json:"id"`
}

// Container is where the clicked element lives.
type Container struct {
	Type        string `json:"type"` // message, view, message_attachment
	ChannelID   string `json:"channel_id"`
	MessageTS   string `json:"message_ts"`
	IsEphemeral bool   `json:"is_ephemeral"`
	ViewID      string `json:"view_id"`
}

// Channel is the conversation of a message interaction.
type Channel struct {
	ID string `json:"id"`
}

// Action is one clicked element.
type Action struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	BlockID  string `json:"block_id"`
	Value    string `json:"value"`
}

// View is a submitted modal.
type View struct {
	ID              string    `json:"id"`
	Type            string    `json:"type"`
	CallbackID      string    `json:"callback_id"`
	PrivateMetadata string    `json:"private_metadata"`
	AppID           string    `json:"app_id"`
	State           ViewState `json:"state"`
}

// ViewState holds the inputs of a modal: block_id → action_id → value.
type ViewState struct {
	Values map[string]map[string]InputValue `json:"values"`
}

// InputValue is one input's state. Value is empty for an untouched optional input.
type InputValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ParseInteraction decodes the JSON of an interaction payload (the payload form
// field over HTTP, the envelope payload in Socket Mode) into a fresh value.
func ParseInteraction(payload []byte) (*Interaction, error) {
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes (at most %d)", ErrTooLarge, len(payload), MaxPayload)
	}
	ic := new(Interaction)
	if err := json.Unmarshal(payload, ic); err != nil {
		return nil, fmt.Errorf("%w: interaction payload: %v", ErrMalformed, err)
	}
	if ic.Type == "" {
		return nil, fmt.Errorf("%w: interaction payload has no type", ErrMalformed)
	}
	return ic, nil
}

// InteractionPayload extracts the payload field from the raw form body of an
// interaction request. The body must hold exactly one payload field; other
// fields are ignored.
func InteractionPayload(body []byte) ([]byte, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	p := form["payload"]
	switch {
	case len(p) == 0 || p[0] == "":
		return nil, fmt.Errorf("%w: no payload field", ErrMalformed)
	case len(p) > 1:
		return nil, fmt.Errorf("%w: %d payload fields", ErrMalformed, len(p))
	}
	return []byte(p[0]), nil
}

// Command is a slash command invocation.
type Command struct {
	Command             string
	Text                string
	UserID              string
	UserName            string
	TeamID              string
	EnterpriseID        string
	IsEnterpriseInstall bool
	ChannelID           string
	APIAppID            string
	TriggerID           string
	ResponseURL         string
}

// commandFields are the form fields read, each allowed at most once: a field
// given twice could mean one thing to us and another to a proxy or a log.
var commandFields = []string{
	"command", "text", "user_id", "user_name", "team_id", "enterprise_id", "is_enterprise_install",
	"channel_id", "api_app_id", "trigger_id", "response_url",
}

// ParseCommand reads a slash command from its form fields.
func ParseCommand(form url.Values) (*Command, error) {
	for _, k := range commandFields {
		if len(form[k]) > 1 {
			return nil, fmt.Errorf("%w: field %s given %d times", ErrMalformed, k, len(form[k]))
		}
	}
	c := &Command{
		Command: form.Get("command"), Text: form.Get("text"), UserID: form.Get("user_id"), UserName: form.Get("user_name"),
		TeamID: form.Get("team_id"), EnterpriseID: form.Get("enterprise_id"), ChannelID: form.Get("channel_id"),
		APIAppID: form.Get("api_app_id"), TriggerID: form.Get("trigger_id"), ResponseURL: form.Get("response_url"),
	}
	switch v := form.Get("is_enterprise_install"); v {
	case "", "false":
	case "true":
		c.IsEnterpriseInstall = true
	default:
		return nil, fmt.Errorf("%w: is_enterprise_install %q", ErrMalformed, clipErr(v, 20))
	}
	switch {
	case c.Command == "":
		return nil, fmt.Errorf("%w: no command", ErrMalformed)
	case c.UserID == "":
		return nil, fmt.Errorf("%w: no user_id", ErrMalformed)
	case c.APIAppID == "":
		return nil, fmt.Errorf("%w: no api_app_id", ErrMalformed)
	}
	return c, nil
}

// CommandForm parses the raw form body of a slash command.
func CommandForm(body []byte) (url.Values, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	return form, nil
}

// Origin is who may talk to this server: one Slack app, installed in one
// workspace (TeamID) or across one Enterprise Grid organisation (EnterpriseID).
//
// A request is accepted when its api_app_id is AppID and the person acting
// belongs to our organisation:
//   - their own workspace (user.team_id; team_id for slash commands) is TeamID
//     or EnterpriseID. This covers shared channels, where team.id may be the
//     other organisation while the user is ours;
//   - or EnterpriseID is set and the payload's enterprise (enterprise.id, else
//     team.enterprise_id; enterprise_id for slash commands) is EnterpriseID.
//     This covers org-wide installs, where team is null and users come from
//     any workspace of the organisation.
//
// Anything else is refused, including a user of another organisation in a
// shared channel and a payload that names no user team at all. team.id alone
// never admits anyone.
type Origin struct {
	AppID        string
	TeamID       string
	EnterpriseID string
}

// CheckInteraction applies the Origin rules to an interaction.
func (o Origin) CheckInteraction(ic *Interaction) error {
	if ic.User == nil || ic.User.ID == "" {
		return fmt.Errorf("%w: no user", ErrForbidden)
	}
	ent := ""
	if ic.Enterprise != nil {
		ent = ic.Enterprise.ID
	} else if ic.Team != nil {
		ent = ic.Team.EnterpriseID
	}
	return o.check(ic.APIAppID, ic.User.TeamID, ent)
}

// CheckCommand applies the Origin rules to a slash command.
func (o Origin) CheckCommand(c *Command) error {
	return o.check(c.APIAppID, c.TeamID, c.EnterpriseID)
}

// originError says which rule of the Origin refused a request ("app" or
// "team"), for the count of refusals; its text is the wrapped error's.
type originError struct {
	rule string
	err  error
}

func (e *originError) Error() string { return e.err.Error() }
func (e *originError) Unwrap() error { return e.err }

// originReason names the rule that refused err: app, or team.
func originReason(err error) string {
	var oe *originError
	if errors.As(err, &oe) {
		return oe.rule
	}
	return "team" // a payload without a user: no organisation to admit
}

func (o Origin) check(appID, userTeam, enterprise string) error {
	if o.AppID == "" || appID != o.AppID {
		return &originError{"app", fmt.Errorf("%w: app %q", ErrForbidden, clipErr(appID, 40))}
	}
	switch {
	case userTeam != "" && (userTeam == o.TeamID || userTeam == o.EnterpriseID):
		return nil
	case o.EnterpriseID != "" && enterprise == o.EnterpriseID:
		return nil
	}
	return &originError{"team", fmt.Errorf("%w: team %q, enterprise %q", ErrForbidden, clipErr(userTeam, 40), clipErr(enterprise, 40))}
}

// Ref is what a button (and a modal's private_metadata) carries: which run,
// which approval request, and the full fingerprint the person was shown. It is
// a claim to check against the store, never a grant.
type Ref struct {
	RunID       string
	RequestID   string
	Fingerprint string
}

const refVersion = "v1"

var (
	refIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	refFPPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// String encodes r as "v1:<run id>:<request id>:<fingerprint>", at most 197
// characters: far under Slack's 2000 for a button value.
func (r Ref) String() string {
	return refVersion + ":" + r.RunID + ":" + r.RequestID + ":" + r.Fingerprint
}

// ParseRef decodes a Ref, refusing anything String would not produce.
func ParseRef(s string) (Ref, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != refVersion {
		return Ref{}, fmt.Errorf("%w: button value %q", ErrMalformed, clipErr(s, 80))
	}
	r := Ref{RunID: parts[1], RequestID: parts[2], Fingerprint: parts[3]}
	if !refIDPattern.MatchString(r.RunID) || !refIDPattern.MatchString(r.RequestID) || !refFPPattern.MatchString(r.Fingerprint) {
		return Ref{}, fmt.Errorf("%w: button value %q", ErrMalformed, clipErr(s, 80))
	}
	return r, nil
}
