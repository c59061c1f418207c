// Package fakeslack is a stand-in for the parts of Slack's Web API that
// signoff calls: chat.postMessage (to a channel, or to a user: a direct
// message), chat.update, chat.getPermalink, chat.postEphemeral, views.open,
// usergroups.users.list, auth.test, conversations.info, and the lookups
// conversations.history, conversations.replies and conversations.open. Tests serve it on
// loopback, and `signoff slack dev` serves it as a local Slack to
// develop against. It records every call, keeps the channel's messages, the
// ephemeral messages and the modals it was asked to open (GET /dev/state
// hands them to another process, which ReadState reads), and can be told to
// fail the next calls (429 with Retry-After, 5xx) so that tests see what
// Slack's failures do to delivery.
package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Call is one request the fake received.
type Call struct {
	Method string     // e.g. chat.postMessage
	Form   url.Values // form fields (or JSON fields flattened to strings at the top level)
	JSON   map[string]any
	Status int // the HTTP status the fake answered with
}

// Message is a message as the fake's channel holds it after posts and updates.
type Message struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Text    string `json:"text"`
	Blocks  string `json:"blocks"` // the JSON of the blocks
	Updates int    `json:"updates"`
	// User is the person a direct message went to: a post to a user id
	// goes, as in Slack, to the bot's direct message channel with them.
	User string `json:"user,omitempty"`
	// ThreadTS is the message a reply was posted in the thread of
	// (chat.postMessage's thread_ts); "" for a message of the channel.
	ThreadTS string `json:"thread_ts,omitempty"`
	// Metadata is the message metadata it was posted with (chat.postMessage's
	// metadata: event_type and event_payload); nil for none.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Ephemeral is a message shown to one user (chat.postEphemeral).
type Ephemeral struct {
	Channel string `json:"channel"`
	User    string `json:"user"`
	Text    string `json:"text"`
	Blocks  string `json:"blocks"` // the JSON of the blocks; "" for none
}

// View is a modal views.open was asked to open.
type View struct {
	ID        string `json:"id"`
	TriggerID string `json:"trigger_id"`
	View      string `json:"view"` // the JSON of the view as sent
}

// State is what the fake holds, in the order it took it.
type State struct {
	Messages   []Message   `json:"messages"`
	Ephemerals []Ephemeral `json:"ephemerals"`
	Views      []View      `json:"views"`
}

// The kinds of Event.
const (
	Posted        = "posted"
	Updated       = "updated"
	EphemeralSent = "ephemeral"
	ViewOpened    = "view"
)

// Event is one message posted or updated, ephemeral message shown, or modal
// opened; Kind says which, and the field of that kind is set.
type Event struct {
	Kind      string
	Message   Message
	Ephemeral Ephemeral
	View      View
}

// Options say how Start serves the fake.
type Options struct {
	// Addr is where to listen (host:port); "" is a loopback port of its own.
	Addr string
	// Team and Enterprise are the workspace and Enterprise Grid organisation
	// auth.test names: Team and none unless set.
	Team, Enterprise string
	// Observe, when set, is told of every Event as it happens, one at a
	// time, in the order the fake took them.
	Observe func(Event)
}

type failure struct {
	status     int
	retryAfter string
	slackError string
	after      bool // do the call, then answer status: the answer was lost
}

// Server is the fake. Point the bot's API URL at URL().
type Server struct {
	ln      net.Listener
	srv     *http.Server
	served  chan struct{}
	observe func(Event)

	mu       sync.Mutex
	calls    []Call
	messages map[string]*Message  // by ts
	postedAt map[string]time.Time // by ts: when the fake took the post (its ts are fixed, for samples that read the same each run)
	order    []string
	ephem    []Ephemeral
	views    []View
	fail     map[string][]failure
	groups   map[string][]string
	seq      int
	notify   chan string
	outside  map[string]bool // channels the bot is not in
	team     string          // the workspace auth.test names
	ent      string          // its enterprise; "" for none
	scopes   []string        // the X-OAuth-Scopes of every answer; nil sends none
}

// New starts a fake Slack on a loopback port of its own.
func New() *Server {
	s, err := Start(Options{})
	if err != nil {
		panic(fmt.Sprintf("fakeslack: %v", err))
	}
	return s
}

// Start serves a fake Slack as o says, until Close.
func Start(o Options) (*Server, error) {
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("local slack: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, served: make(chan struct{}), observe: o.Observe,
		messages: map[string]*Message{}, postedAt: map[string]time.Time{}, fail: map[string][]failure{}, groups: map[string][]string{}, notify: make(chan string, 1024),
		outside: map[string]bool{}, team: Team, ent: o.Enterprise}
	if o.Team != "" {
		s.team = o.Team
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // ErrServerClosed once Close is called
	}()
	return s, nil
}

// URL is the API base URL, ending in a slash as slack-go expects.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/api/" }

// Close stops the fake: it closes its listener and its connections.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.served
}

// FailNext makes the next call of method answer with status (and Retry-After
// seconds when retryAfter is set), once per call of FailNext.
func (s *Server) FailNext(method string, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], failure{status: status, retryAfter: retryAfter})
}

// LoseNext makes the next call of method do what it asks (a post is
// posted) and then answer 500, as when the answer was lost on its way or
// the caller died before reading it.
func (s *Server) LoseNext(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], failure{status: http.StatusInternalServerError, after: true})
}

// ErrorNext makes the next call of method answer 200 with ok:false and the error.
func (s *Server) ErrorNext(method, slackError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], failure{status: http.StatusOK, slackError: slackError})
}

// SetGroup sets the members of a user group for usergroups.users.list.
func (s *Server) SetGroup(id string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = members
}

// SetMember says whether the bot is in channel (it is in every channel
// until told otherwise): outside one, posts answer not_in_channel.
func (s *Server) SetMember(channel string, member bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outside[channel] = !member
}

// Bot is the bot user the fake's auth.test names.
const Bot = "U0SIGNOFF1"

// Team is the workspace the fake's auth.test names unless SetTeam said otherwise.
const Team = "T0SHOP0001"

// SetTeam sets the workspace and enterprise ("" for none) auth.test names.
func (s *Server) SetTeam(team, enterprise string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.team, s.ent = team, enterprise
}

// SetScopes makes every answer carry the token's scopes in X-OAuth-Scopes,
// as Slack's do; until then the fake sends no such header.
func (s *Server) SetScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes = append([]string{}, scopes...)
}

// Calls returns the calls received so far, of one method or all ("").
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns the channel's messages, in the order they were posted.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messagesLocked()
}

// Posts returns the channel's messages that are no reply in a thread, in
// the order they were posted.
func (s *Server) Posts() []Message {
	var out []Message
	for _, m := range s.Messages() {
		if m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// Replies returns the replies in the thread of ts, in the order they were
// posted.
func (s *Server) Replies(ts string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		if m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// State returns what the fake holds: what GET /dev/state answers.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{Messages: s.messagesLocked(), Ephemerals: append([]Ephemeral{}, s.ephem...), Views: append([]View{}, s.views...)}
}

func (s *Server) messagesLocked() []Message {
	out := make([]Message, 0, len(s.order))
	for _, ts := range s.order {
		out = append(out, *s.messages[ts])
	}
	return out
}

// StatePath is where the fake answers with its State as JSON.
const StatePath = "/dev/state"

// ReadState asks the fake whose API URL (or base URL) is apiURL for its
// State, from another process.
func ReadState(ctx context.Context, client *http.Client, apiURL string) (State, error) {
	base := strings.TrimSuffix(strings.TrimSuffix(apiURL, "/"), "/api")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+StatePath, nil)
	if err != nil {
		return State{}, fmt.Errorf("read the local slack's state: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return State{}, fmt.Errorf("read the local slack's state: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return State{}, fmt.Errorf("read the local slack's state: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return State{}, fmt.Errorf("read the local slack's state: %s answered %s: is it signoff slack dev?", base+StatePath, resp.Status)
	}
	var st State
	if err := json.Unmarshal(body, &st); err != nil {
		return State{}, fmt.Errorf("read the local slack's state from %s: %w: is it signoff slack dev?", base+StatePath, err)
	}
	return st, nil
}

// Notify receives the method name of every successful call, for tests that
// wait for delivery without sleeping.
func (s *Server) Notify() <-chan string { return s.notify }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == StatePath && r.Method == http.MethodGet {
		writeJSON(w, s.State())
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	call := readCall(r, method)

	s.mu.Lock()
	if fs := s.fail[method]; len(fs) > 0 {
		f := fs[0]
		s.fail[method] = fs[1:]
		call.Status = f.status
		s.calls = append(s.calls, call)
		if answer, ok := methods[method]; ok && f.after {
			answer(s, call)
		}
		s.mu.Unlock()
		writeFailure(w, f)
		return
	}
	call.Status = http.StatusOK
	s.calls = append(s.calls, call)
	resp := map[string]any{"ok": false, "error": "unknown_method"}
	if answer, ok := methods[method]; ok {
		resp = answer(s, call)
	}
	scopes := s.scopes
	s.mu.Unlock()
	if scopes != nil {
		w.Header().Set("X-OAuth-Scopes", strings.Join(scopes, ","))
	}
	if ok, _ := resp["ok"].(bool); ok {
		select {
		case s.notify <- method:
		default:
		}
	}
	writeJSON(w, resp)
}

// readCall is the request as the bot sent it: a JSON body's fields, or a
// form body's and the query's, all as form values.
func readCall(r *http.Request, method string) Call {
	body, _ := io.ReadAll(r.Body)
	call := Call{Method: method, Form: url.Values{}}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		call.Form, _ = url.ParseQuery(string(body))
		for k, v := range r.URL.Query() {
			call.Form[k] = v
		}
		return call
	}
	_ = json.Unmarshal(body, &call.JSON)
	for k, v := range call.JSON {
		if str, ok := v.(string); ok {
			call.Form.Set(k, str)
		} else if b, err := json.Marshal(v); err == nil {
			call.Form.Set(k, string(b))
		}
	}
	return call
}

// writeFailure answers as a failure set up for the call asks: a Slack error
// in a 200, or an HTTP status with its Retry-After.
func writeFailure(w http.ResponseWriter, f failure) {
	if f.slackError != "" {
		writeJSON(w, map[string]any{"ok": false, "error": f.slackError})
		return
	}
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	http.Error(w, http.StatusText(f.status), f.status)
}

// methods answers each Web API method the fake knows; s.mu is held.
var methods = map[string]func(s *Server, call Call) map[string]any{
	"chat.postMessage":      (*Server).postMessage,
	"chat.update":           (*Server).update,
	"chat.postEphemeral":    (*Server).postEphemeral,
	"views.open":            (*Server).openView,
	"usergroups.users.list": (*Server).groupMembers,
	"auth.test":             (*Server).authTest,
	"conversations.info":    (*Server).channelInfo,
	"chat.getPermalink":     (*Server).permalink,
	"conversations.history": (*Server).history,
	"conversations.replies": (*Server).replies,
	"conversations.open":    (*Server).open,
}

func (s *Server) postMessage(call Call) map[string]any {
	if s.outside[call.Form.Get("channel")] {
		return map[string]any{"ok": false, "error": "not_in_channel"}
	}
	s.seq++
	ts := fmt.Sprintf("1700000000.%06d", s.seq)
	ch, user := call.Form.Get("channel"), ""
	if strings.HasPrefix(ch, "U") || strings.HasPrefix(ch, "W") {
		// Slack answers with the direct message channel's own id.
		ch, user = "D"+ch[1:], ch
	}
	m := &Message{Channel: ch, TS: ts, Text: call.Form.Get("text"), Blocks: call.Form.Get("blocks"), User: user, ThreadTS: call.Form.Get("thread_ts")}
	if md := call.Form.Get("metadata"); md != "" {
		_ = json.Unmarshal([]byte(md), &m.Metadata)
	}
	s.messages[ts] = m
	s.order = append(s.order, ts)
	s.postedAt[ts] = time.Now()
	s.tell(Event{Kind: Posted, Message: *m})
	return map[string]any{"ok": true, "channel": ch, "ts": ts}
}

// permalink links a posted message, as chat.getPermalink does.
func (s *Server) permalink(call Call) map[string]any {
	ch, ts := call.Form.Get("channel"), call.Form.Get("message_ts")
	if m, ok := s.messages[ts]; !ok || m.Channel != ch {
		return map[string]any{"ok": false, "error": "message_not_found"}
	}
	return map[string]any{"ok": true, "channel": ch, "permalink": PermalinkOf(ch, ts)}
}

// PermalinkOf is the link the fake gives a message: Slack's form, on a
// workspace of its own.
func PermalinkOf(channel, ts string) string {
	return "https://fake.slack.test/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

func (s *Server) update(call Call) map[string]any {
	ts := call.Form.Get("ts")
	m, ok := s.messages[ts]
	if !ok {
		return map[string]any{"ok": false, "error": "message_not_found"}
	}
	m.Text, m.Blocks = call.Form.Get("text"), call.Form.Get("blocks")
	m.Updates++
	s.tell(Event{Kind: Updated, Message: *m})
	return map[string]any{"ok": true, "channel": m.Channel, "ts": ts, "text": m.Text}
}

func (s *Server) postEphemeral(call Call) map[string]any {
	s.seq++
	e := Ephemeral{Channel: call.Form.Get("channel"), User: call.Form.Get("user"), Text: call.Form.Get("text"), Blocks: call.Form.Get("blocks")}
	s.ephem = append(s.ephem, e)
	s.tell(Event{Kind: EphemeralSent, Ephemeral: e})
	return map[string]any{"ok": true, "message_ts": fmt.Sprintf("1700000000.%06d", s.seq)}
}

func (s *Server) openView(call Call) map[string]any {
	v := View{ID: fmt.Sprintf("V%06d", len(s.calls)), TriggerID: call.Form.Get("trigger_id"), View: call.Form.Get("view")}
	s.views = append(s.views, v)
	s.tell(Event{Kind: ViewOpened, View: v})
	return map[string]any{"ok": true, "view": map[string]any{"id": v.ID}}
}

func (s *Server) groupMembers(call Call) map[string]any {
	members, ok := s.groups[call.Form.Get("usergroup")]
	if !ok {
		return map[string]any{"ok": false, "error": "no_such_subteam"}
	}
	return map[string]any{"ok": true, "users": members}
}

func (s *Server) authTest(Call) map[string]any {
	resp := map[string]any{"ok": true, "user_id": Bot, "user": "signoff", "team_id": s.team, "team": "Lampkin Shop",
		"url": "https://lampkin-shop.slack.com/", "bot_id": "B0SIGNOFF1"}
	if s.ent != "" {
		resp["enterprise_id"] = s.ent
	}
	return resp
}

func (s *Server) channelInfo(call Call) map[string]any {
	ch := call.Form.Get("channel")
	return map[string]any{"ok": true, "channel": map[string]any{"id": ch, "name": "approvals", "is_channel": true, "is_member": !s.outside[ch]}}
}

// tell passes ev to the observer; s.mu is held, so events are told one at
// a time and in the order they happened.
func (s *Server) tell(ev Event) {
	if s.observe != nil {
		s.observe(ev)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// history answers conversations.history: the channel's messages that are
// no thread reply, newest first, after oldest, limit a page (100 unless
// set), the cursor an offset; metadata only with include_all_metadata.
func (s *Server) history(call Call) map[string]any {
	ch := call.Form.Get("channel")
	var msgs []*Message
	for i := len(s.order) - 1; i >= 0; i-- {
		m := s.messages[s.order[i]]
		if m.Channel == ch && m.ThreadTS == "" && s.after(m.TS, call.Form.Get("oldest")) {
			msgs = append(msgs, m)
		}
	}
	return s.page(call, msgs)
}

// replies answers conversations.replies: the parent message ts and its
// thread's replies, oldest first, as history pages them.
func (s *Server) replies(call Call) map[string]any {
	ch, parent := call.Form.Get("channel"), call.Form.Get("ts")
	p, ok := s.messages[parent]
	if !ok || p.Channel != ch {
		return map[string]any{"ok": false, "error": "thread_not_found"}
	}
	msgs := []*Message{p}
	for _, ts := range s.order {
		if m := s.messages[ts]; m.ThreadTS == parent && m.Channel == ch && s.after(ts, call.Form.Get("oldest")) {
			msgs = append(msgs, m)
		}
	}
	return s.page(call, msgs)
}

// page is one page of msgs as Slack answers it.
func (s *Server) page(call Call, msgs []*Message) map[string]any {
	limit, err := strconv.Atoi(call.Form.Get("limit"))
	if err != nil || limit <= 0 {
		limit = 100
	}
	from, _ := strconv.Atoi(call.Form.Get("cursor"))
	from = min(max(from, 0), len(msgs))
	to := min(from+limit, len(msgs))
	meta := call.Form.Get("include_all_metadata") == "1" || call.Form.Get("include_all_metadata") == "true"
	out := make([]map[string]any, 0, to-from)
	for _, m := range msgs[from:to] {
		o := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": Bot}
		if m.ThreadTS != "" {
			o["thread_ts"] = m.ThreadTS
		}
		if meta && m.Metadata != nil {
			o["metadata"] = m.Metadata
		}
		out = append(out, o)
	}
	resp := map[string]any{"ok": true, "messages": out, "has_more": to < len(msgs)}
	if to < len(msgs) {
		resp["response_metadata"] = map[string]any{"next_cursor": strconv.Itoa(to)}
	}
	return resp
}

// after says whether the message ts was posted after oldest ("" for no
// bound). Slack's ts is the time of the post; the fake's are not, so it
// compares the time it took the post.
func (s *Server) after(ts, oldest string) bool {
	if oldest == "" {
		return true
	}
	sec, err := strconv.ParseFloat(oldest, 64)
	if err != nil {
		return true
	}
	return s.postedAt[ts].After(time.Unix(0, int64(sec*1e9)))
}

// open answers conversations.open with users: the direct message channel
// with the user, the one a post to the user's id goes to.
func (s *Server) open(call Call) map[string]any {
	u := call.Form.Get("users")
	if u == "" || strings.Contains(u, ",") {
		return map[string]any{"ok": false, "error": "not_implemented"}
	}
	return map[string]any{"ok": true, "channel": map[string]any{"id": "D" + u[1:]}}
}
