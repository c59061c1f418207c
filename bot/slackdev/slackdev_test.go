package slackdev

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
)

func TestRender(t *testing.T) {
	for _, tt := range []struct {
		name, blocks, fallback string
		want                   []string
	}{
		{"no blocks", "", "just text", []string{"just text"}},
		{"header and section", `[{"type":"header","text":{"type":"plain_text","text":"Approval needed"}},{"type":"section","text":{"type":"mrkdwn","text":"*Why:* two\nlines"}}]`, "",
			[]string{"Approval needed", "*Why:* two", "lines"}},
		{"mrkdwn as Slack shows it", `[{"type":"section","text":{"type":"mrkdwn","text":"<@U0LEAD0001> and <@U0MGR00001|maria> <!here> by <!date^1796288400^{date_short_pretty}|2026-12-03 09:00 UTC>: <https://example.com/a|the ticket> &lt;b&gt; &amp; <https://example.com/b>"}}]`, "",
			[]string{"@U0LEAD0001 and @maria @here by 2026-12-03 09:00 UTC: the ticket (https://example.com/a) <b> & https://example.com/b"}},
		{"fields and context", `[{"type":"section","fields":[{"type":"mrkdwn","text":"*Rule*\nbig"},{"type":"mrkdwn","text":"*Task*\nT-1"}]},{"type":"context","elements":[{"type":"mrkdwn","text":"Run x"},{"type":"image","image_url":"u","alt_text":"logo"}]},{"type":"divider"}]`, "",
			[]string{"*Rule*", "big", "*Task*", "T-1", "Run x · logo", "---"}},
		{"decision buttons", `[{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":"Approve"},"action_id":"signoff_approve","value":"v1:run_1:req_1:` + strings.Repeat("a", 64) + `"},{"type":"button","text":{"type":"plain_text","text":"Reject"},"action_id":"signoff_reject","value":"x"}]}]`, "",
			[]string{"buttons: [Approve] [Reject]    signoff slack click run_1 approve|reject|edit --as USER"}},
		{"inputs", `[{"type":"input","block_id":"reason","label":{"type":"plain_text","text":"Why?"},"element":{"type":"plain_text_input","action_id":"reason"}},{"type":"input","block_id":"action_0","label":{"type":"plain_text","text":"1. refund"},"element":{"type":"plain_text_input","action_id":"args","initial_value":"{\n  \"a\": 1\n}"}}]`, "",
			[]string{"Why? [input reason]", "1. refund [input action_0]:", "  {", `    "a": 1`, "  }"}},
		{"unknown and broken", `[{"type":"video"}]`, "", []string{"(video block)"}},
		{"not JSON", `[{`, "", []string{"(blocks are not Block Kit JSON: unexpected end of JSON input)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.blocks, tt.fallback); !slices.Equal(got, tt.want) {
				t.Errorf("Render =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	initial := "{\n  \"amount\": 119.50,\n  \"currency\": \"CAD\",\n  \"meta\": {\"a\": 1, \"b\": 2}\n}"
	for _, tt := range []struct{ patch, want, err string }{
		{`{"amount": 60}`, "{\n  \"amount\": 60,\n  \"currency\": \"CAD\",\n  \"meta\": {\n    \"a\": 1,\n    \"b\": 2\n  }\n}", ""},
		{`{"currency": null, "meta": {"b": null, "c": "<&>"}}`, "{\n  \"amount\": 119.50,\n  \"meta\": {\n    \"a\": 1,\n    \"c\": \"<&>\"\n  }\n}", ""},
		{`{"amount": `, "", "--edit is not JSON"},
		{`{} {}`, "", "more than one JSON value"},
	} {
		got, err := mergePatch(initial, tt.patch)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("mergePatch(%s) = %q, %v; want an error with %q", tt.patch, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("mergePatch(%s) =\n%s\n%v; want\n%s", tt.patch, got, err, tt.want)
		}
	}
}

// recorded reads a payload of fixtures/slack: what Slack sent a workspace.
func recorded(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "slack", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// sameShape fails t unless got has every key want has, recursively through
// objects (and the first element of arrays), with values of the same JSON
// kind. The blocks of a message or a view are its content, not the
// payload's shape, and a button's confirm is there when it has one.
func sameShape(t *testing.T, path string, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: %T, want an object", path, got)
			return
		}
		for k, wv := range w {
			if k == "blocks" || k == "confirm" {
				continue
			}
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s.%s: missing", path, k)
				continue
			}
			if wv == nil || gv == nil {
				continue // null where Slack may send an object (team, enterprise)
			}
			sameShape(t, path+"."+k, gv, wv)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			t.Errorf("%s: %T, want an array", path, got)
			return
		}
		if len(w) > 0 && len(g) > 0 {
			sameShape(t, path+"[0]", g[0], w[0])
		}
	case string, float64, bool:
		if gk, wk := kind(got), kind(want); gk != wk {
			t.Errorf("%s: %s, want %s", path, gk, wk)
		}
	}
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return "other"
}

// fakeServe stands in for serve: it verifies each request's signature as
// serve does, keeps the payloads, opens the reject form for a Reject click
// (with the click's trigger id, on the local Slack), and answers commands.
type fakeServe struct {
	t     *testing.T
	slack *bot.API
	mu    sync.Mutex
	got   []map[string]any
	forms []string
}

func (f *fakeServe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := bot.VerifySignature(r.Header, body, "dev-secret", time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/slack/commands" {
		f.mu.Lock()
		f.forms = append(f.forms, string(body))
		f.mu.Unlock()
		_, _ = io.WriteString(w, `{"response_type":"ephemeral","text":"Nothing is waiting.","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"Nothing is *waiting*."}}]}`)
		return
	}
	p, err := bot.InteractionPayload(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, m)
	f.mu.Unlock()
	ic, err := bot.ParseInteraction(p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ic.Type == bot.TypeBlockActions && ic.Actions[0].ActionID == bot.ActionReject {
		input := slack.NewPlainTextInputBlockElement(nil, "reason")
		view := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false),
			Submit: slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false), CallbackID: bot.CallbackReject, PrivateMetadata: ic.Actions[0].Value,
			Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("reason", slack.NewTextBlockObject(slack.PlainTextType, "Why?", false, false), nil, input)}}}
		if err := f.slack.OpenView(r.Context(), ic.TriggerID, view); err != nil {
			f.t.Errorf("views.open: %v", err)
		}
	}
}

// TestRequestsHaveSlacksShape: a click, the form it opens and a slash command
// are sent as Slack sends them, signed: every field of the payloads Slack
// sent a workspace (fixtures/slack) is there, with values of the same kind;
// the button's value is the posted message's; the form's state holds what
// was typed; the command's form has Slack's fields, in Slack's order.
func TestRequestsHaveSlacksShape(t *testing.T) {
	ctx := context.Background()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	api := bot.NewAPI("xoxb-any", fs.URL(), 5*time.Second)
	serve := &fakeServe{t: t, slack: api}
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)

	ref := "v1:run_1:req_1:" + strings.Repeat("ab", 32)
	buttons := slack.NewActionBlock("signoff_decide_req_1",
		slack.NewButtonBlockElement(bot.ActionApprove, ref, slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false)).WithStyle(slack.StylePrimary),
		slack.NewButtonBlockElement(bot.ActionReject, ref, slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false)).WithStyle(slack.StyleDanger))
	if _, _, err := api.PostMessage(ctx, "C0APPROVALS", []slack.Block{buttons}, "Approval needed"); err != nil {
		t.Fatal(err)
	}
	cl := &Client{ServeURL: srv.URL, SlackURL: fs.URL(), Secret: "dev-secret", HTTP: srv.Client(),
		Space: Workspace{AppID: "A0SIGNOFF1", TeamID: "T0SHOP0001", Channel: "C0APPROVALS"}}

	out, err := cl.Click(ctx, Click{Run: "run_1", Verb: "approve", User: "U0LEAD0001"})
	if err != nil || out.Refused {
		t.Fatalf("approve: %+v %v", out, err)
	}
	out, err = cl.Click(ctx, Click{Run: "run_1", Verb: "reject", User: "U0LEAD0001", Reason: "no <thanks> & bye"})
	if err != nil || out.Refused {
		t.Fatalf("reject: %+v %v", out, err)
	}
	if len(serve.got) != 3 {
		t.Fatalf("serve got %d interactions, want the approve, the reject and the form", len(serve.got))
	}
	approve, reject, form := serve.got[0], serve.got[1], serve.got[2]
	sameShape(t, "block_actions", approve, recorded(t, "block_actions_approve.json"))
	sameShape(t, "block_actions", reject, recorded(t, "block_actions_reject.json"))
	sameShape(t, "view_submission", form, recorded(t, "view_submission_reject.json"))
	action := approve["actions"].([]any)[0].(map[string]any)
	if action["value"] != ref || action["action_id"] != bot.ActionApprove || action["block_id"] != "signoff_decide_req_1" || action["style"] != "primary" {
		t.Errorf("the clicked button: %v", action)
	}
	if approve["trigger_id"] == reject["trigger_id"] || reject["trigger_id"] == form["trigger_id"] {
		t.Error("two requests share a trigger id")
	}
	view := form["view"].(map[string]any)
	state := view["state"].(map[string]any)["values"].(map[string]any)["reason"].(map[string]any)["reason"].(map[string]any)
	if state["value"] != "no <thanks> & bye" || view["private_metadata"] != ref || view["callback_id"] != bot.CallbackReject {
		t.Errorf("the submitted form: %v", view)
	}

	out, err = cl.Command(ctx, "/runs  pending 2", "U0LEAD0001")
	if err != nil || !slices.Equal(out.Lines, []string{"serve answered /runs pending 2 (only U0LEAD0001 sees it):", "    Nothing is *waiting*."}) {
		t.Fatalf("command: %q %v", out.Lines, err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "slack", "slash_runs.form"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := formKeys(t, serve.forms[0]), formKeys(t, strings.TrimSpace(string(raw))); !slices.Equal(got, want) {
		t.Errorf("command fields %v, want Slack's %v", got, want)
	}
	f, _ := url.ParseQuery(serve.forms[0])
	if f.Get("command") != "/runs" || f.Get("text") != "pending 2" || f.Get("user_id") != "U0LEAD0001" || f.Get("api_app_id") != "A0SIGNOFF1" {
		t.Errorf("command form %v", f)
	}
}

// formKeys are the field names of a form body, in order.
func formKeys(t *testing.T, body string) []string {
	t.Helper()
	var keys []string
	for _, kv := range strings.Split(body, "&") {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}
