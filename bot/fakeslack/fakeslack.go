// Package fakeslack is a fake of the parts of Slack's Web API that signoff
// calls, served over loopback for tests: chat.postMessage, chat.update,
// chat.postEphemeral, views.open, usergroups.users.list, auth.test and
// conversations.info. It records every
// call and can be told to fail the next calls (429 with Retry-After, 5xx) so
// that tests see what Slack's failures do to delivery.
package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
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
	Channel string
	TS      string
	Text    string
	Blocks  string // the JSON of the blocks
	Updates int
}

type failure struct {
	status     int
	retryAfter string
	slackError string
}

// Server is the fake. Point the bot's API URL at URL().
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    []Call
	messages map[string]*Message // by ts
	order    []string
	fail     map[string][]failure
	groups   map[string][]string
	seq      int
	notify   chan string
	outside  map[string]bool // channels the bot is not in
	team     string          // the workspace auth.test names
	ent      string          // its enterprise; "" for none
	scopes   []string        // the X-OAuth-Scopes of every answer; nil sends none
}

// New starts a fake Slack on a loopback port.
func New() *Server {
	s := &Server{messages: map[string]*Message{}, fail: map[string][]failure{}, groups: map[string][]string{}, notify: make(chan string, 1024),
		outside: map[string]bool{}, team: Team}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

// URL is the API base URL, ending in a slash as slack-go expects.
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// FailNext makes the next call of method answer with status (and Retry-After
// seconds when retryAfter is set), once per call of FailNext.
func (s *Server) FailNext(method string, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], failure{status: status, retryAfter: retryAfter})
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
	out := make([]Message, 0, len(s.order))
	for _, ts := range s.order {
		out = append(out, *s.messages[ts])
	}
	return out
}

// Notify receives the method name of every successful call, for tests that
// wait for delivery without sleeping.
func (s *Server) Notify() <-chan string { return s.notify }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	call := Call{Method: method, Form: url.Values{}}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(body, &call.JSON)
		for k, v := range call.JSON {
			if str, ok := v.(string); ok {
				call.Form.Set(k, str)
			} else if b, err := json.Marshal(v); err == nil {
				call.Form.Set(k, string(b))
			}
		}
	} else {
		call.Form, _ = url.ParseQuery(string(body))
		for k, v := range r.URL.Query() {
			call.Form[k] = v
		}
	}

	s.mu.Lock()
	if fs := s.fail[method]; len(fs) > 0 {
		f := fs[0]
		s.fail[method] = fs[1:]
		call.Status = f.status
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		if f.slackError != "" {
			writeJSON(w, map[string]any{"ok": false, "error": f.slackError})
			return
		}
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		http.Error(w, http.StatusText(f.status), f.status)
		return
	}
	call.Status = http.StatusOK
	s.calls = append(s.calls, call)
	var resp map[string]any
	switch method {
	case "chat.postMessage":
		if s.outside[call.Form.Get("channel")] {
			resp = map[string]any{"ok": false, "error": "not_in_channel"}
			break
		}
		s.seq++
		ts := fmt.Sprintf("1700000000.%06d", s.seq)
		ch := call.Form.Get("channel")
		s.messages[ts] = &Message{Channel: ch, TS: ts, Text: call.Form.Get("text"), Blocks: call.Form.Get("blocks")}
		s.order = append(s.order, ts)
		resp = map[string]any{"ok": true, "channel": ch, "ts": ts}
	case "chat.update":
		ts := call.Form.Get("ts")
		m, ok := s.messages[ts]
		if !ok {
			resp = map[string]any{"ok": false, "error": "message_not_found"}
			break
		}
		m.Text, m.Blocks = call.Form.Get("text"), call.Form.Get("blocks")
		m.Updates++
		resp = map[string]any{"ok": true, "channel": m.Channel, "ts": ts, "text": m.Text}
	case "chat.postEphemeral":
		s.seq++
		resp = map[string]any{"ok": true, "message_ts": fmt.Sprintf("1700000000.%06d", s.seq)}
	case "views.open":
		resp = map[string]any{"ok": true, "view": map[string]any{"id": fmt.Sprintf("V%06d", len(s.calls))}}
	case "usergroups.users.list":
		members, ok := s.groups[call.Form.Get("usergroup")]
		if !ok {
			resp = map[string]any{"ok": false, "error": "no_such_subteam"}
			break
		}
		resp = map[string]any{"ok": true, "users": members}
	case "auth.test":
		resp = map[string]any{"ok": true, "user_id": Bot, "user": "signoff", "team_id": s.team, "team": "Lampkin Shop",
			"url": "https://lampkin-shop.slack.com/", "bot_id": "B0SIGNOFF1"}
		if s.ent != "" {
			resp["enterprise_id"] = s.ent
		}
	case "conversations.info":
		ch := call.Form.Get("channel")
		resp = map[string]any{"ok": true, "channel": map[string]any{"id": ch, "name": "approvals", "is_channel": true, "is_member": !s.outside[ch]}}
	default:
		resp = map[string]any{"ok": false, "error": "unknown_method"}
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

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
