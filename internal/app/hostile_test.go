package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// actionLine is how `show` lists an action: indented, numbered.
var actionLine = regexp.MustCompile(`(?m)^\s+\d+\. `)

// TestHostileTextIsInertOnTheTerminal: an agent writes the hostile corpus into
// every multi-line field a proposal has (summary, evidence sources and data);
// what show, runs, approve, history and trace print carries no control byte
// but the renderer's own newlines and tabs, no bidi control and no zero-width
// character, and lists exactly the one real action. The single-line fields
// refuse the corpus at submit and nothing is stored.
func TestHostileTextIsInertOnTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	corpus := texttest.Corpus(t)
	type evidence struct {
		Source string         `json:"source"`
		Data   map[string]any `json:"data"`
	}
	var ev []evidence
	for _, s := range corpus {
		ev = append(ev, evidence{Source: s, Data: map[string]any{"note": s, "nested": map[string]string{"x": s}, "list": []string{s}}})
	}
	p := map[string]any{
		"task_id":   "T-65273",
		"requester": map[string]string{"id": "agent:resolver", "name": "Resolver agent"},
		"summary":   strings.Join(corpus, " "),
		"actions": []map[string]any{{"name": "request_refund", "args": map[string]any{
			"order_id": "LK-507862", "payment_id": "PAY-507862-2", "amount": 119.00, "currency": "CAD", "reason_code": "RFD-DOUBLE"}}},
		"evidence": ev,
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // bidi and zero-width characters go in raw, as an agent would send them
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	id := runIDOf(t, must(t, dir, exitWaiting, "submit", proposal(t, dir, "hostile.json", body.String())))

	outputs := map[string]string{
		"show":    must(t, dir, exitWaiting, "show", id),
		"runs":    must(t, dir, exitDone, "runs"),
		"history": must(t, dir, exitDone, "history", id),
		"trace":   must(t, dir, exitDone, "trace", id),
	}
	outputs["approve"] = must(t, dir, exitDone, "approve", id, "--as", lead1, "--reason", "checked")
	outputs["show after"] = must(t, dir, exitDone, "show", id)
	for cmd, out := range outputs {
		if live := texttest.Live(out, true); live != "" {
			t.Errorf("%s prints %s", cmd, live)
		}
	}
	for _, cmd := range []string{"show", "show after"} {
		// One real action, and the corpus's fake one never starts a line.
		if n := len(actionLine.FindAllString(outputs[cmd], -1)); n != 1 {
			t.Errorf("%s lists %d actions, want 1:\n%s", cmd, n, outputs[cmd])
		}
	}
	if !strings.Contains(outputs["show"], `\x1b[1A\x1b[2K`) || !strings.Contains(outputs["show"], `\u202e`) {
		t.Errorf("show hides what the agent wrote instead of showing it escaped:\n%s", outputs["show"])
	}
	if got := oneRefund(t, dir, id+"/1", "119.00"); got.Amount != "119.00" {
		t.Errorf("refunded %s", got.Amount)
	}

	// Single-line fields refuse the corpus: exit 2, nothing stored.
	before := len(runs(t, dir))
	for i, s := range corpus {
		if !strings.ContainsFunc(s, refusedOnOneLine) {
			continue // the corpus's mrkdwn, zero-width and filler strings are fine on one line, and shown inert
		}
		for _, field := range []string{"task_id", "requester.id", "requester.name"} {
			q := map[string]any{}
			if err := json.Unmarshal(body.Bytes(), &q); err != nil {
				t.Fatal(err)
			}
			switch field {
			case "task_id":
				q["task_id"] = s
			case "requester.id":
				q["requester"] = map[string]string{"id": s}
			case "requester.name":
				q["requester"] = map[string]string{"id": "agent:resolver", "name": s}
			}
			b, _ := json.Marshal(q)
			code, out, errs := signoffIn(t, dir, string(b), "submit", "-")
			if code != exitRefused || !strings.Contains(errs, field) {
				t.Errorf("corpus %d in %s: exit %d, stderr %q, want exit 2 naming the field", i, field, code, errs)
			}
			if live := texttest.Live(out+errs, true); live != "" {
				t.Errorf("corpus %d in %s: the refusal prints %s", i, field, live)
			}
		}
	}
	if after := len(runs(t, dir)); after != before {
		t.Errorf("refused proposals stored %d runs", after-before)
	}
}

// refusedOnOneLine is what a single-line field may not hold: controls (line
// breaks and tabs included) and bidirectional controls.
func refusedOnOneLine(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x061c || r == 0x200e || r == 0x200f ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// TestRenderersShowEveryFieldInert fills every string of what the terminal
// renderers print (a run view, the run list, the history, the trace, the
// shop's changes) with the hostile corpus, as a store written by an attacker
// could hold it, and checks that nothing live reaches the terminal.
func TestRenderersShowEveryFieldInert(t *testing.T) {
	corpus := texttest.Corpus(t)
	n := 0
	next := func() string { n++; return corpus[n%len(corpus)] }
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

	var v workflow.RunView
	fill(reflect.ValueOf(&v).Elem(), next)
	v.Status = record.StatusWaitingApproval
	v.Problem = ""
	var list []*workflow.RunView
	fill(reflect.ValueOf(&list).Elem(), next)
	var hist []workflow.HistoryEntry
	fill(reflect.ValueOf(&hist).Elem(), next)
	var changes []demo.Change
	fill(reflect.ValueOf(&changes).Elem(), next)
	var orders []demo.OrderWithPayments
	fill(reflect.ValueOf(&orders).Elem(), next)
	roles := config.Default().Roles

	// Arguments shown as stored: the renderers, not redaction, must make them inert.
	asStored := func(_ string, args json.RawMessage) string { return string(args) }
	plain, err := workflow.NewActionSpec("any", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	anySpec := func(string) (*workflow.ActionSpec, bool) { return plain, true }
	// Every decision an edit, and every edit's changes from the corpus too.
	var edits []editRecord
	for i := range v.Decisions {
		edits = append(edits, editRecord{by: v.Decisions[i].By, at: v.Decisions[i].At,
			changes: policy.ChangedFields([]record.Action{{Args: json.RawMessage(`{}`)}}, v.Actions)})
	}
	var out bytes.Buffer
	renderRun(&out, &v, roles, asStored, anySpec, nil, now)
	v.Problem = next()
	renderRun(&out, &v, roles, asStored, anySpec, edits, now)
	renderRuns(&out, list, now)
	renderHistory(&out, hist, historyEvents(hostileEvents(hist, next)), anySpec)
	renderTrace(&out, hist, asStored, 3)
	renderChanges(&out, changes)
	renderOrders(&out, orders)
	if live := texttest.Live(out.String(), true); live != "" {
		t.Fatalf("the terminal renderers print %s:\n%s", live, out.String())
	}
	if n < 40 {
		t.Fatalf("only %d fields were filled: the filler missed the views", n)
	}
	if !strings.Contains(out.String(), texttest.Marker) {
		t.Fatal("no corpus string reached the output: the test checks nothing")
	}
}

// hostileEvents are audit events of every kind naming each checkpoint of
// hist, every string of them, their details' too, from next(), and every
// operation they name one of the checkpoint's.
func hostileEvents(hist []workflow.HistoryEntry, next func() string) []*record.AuditEvent {
	var evs []*record.AuditEvent
	for _, h := range hist {
		key := next()
		if h.State != nil && len(h.State.Operations) > 0 {
			key = h.State.Operations[0].Key
		}
		for _, kind := range record.Events {
			detail, _ := json.Marshal(map[string]any{"to": next(), "deadline": next(), "key": key, "choice": next(),
				"from_run": next(), "from_seq": 1, "step": 1, "failures": 1, "through_seq": 1, "verdict": next()})
			evs = append(evs, &record.AuditEvent{Seq: int64(len(evs) + 1), RunID: next(), Actor: next(), Action: kind, Detail: detail, CheckpointSeq: h.Seq})
		}
	}
	return evs
}

// fill sets every exported string of v to next(), every raw JSON value to an
// object holding next() (with bidi and zero-width characters unescaped, as
// JSON allows), every slice to two filled items and every nil pointer to a
// filled value. A type that holds itself (a composite requirement) is
// filled two levels deep.
func fill(v reflect.Value, next func() string) { fillIn(v, next, map[reflect.Type]int{}) }

func fillIn(v reflect.Value, next func() string, open map[reflect.Type]int) {
	fill := func(v reflect.Value, next func() string) { fillIn(v, next, open) }
	switch v.Kind() {
	case reflect.String:
		v.SetString(next())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), next)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() || open[v.Type()] >= 2 {
			return
		}
		open[v.Type()]++
		defer func() { open[v.Type()]-- }()
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), next)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(map[string]string{"id": next(), "note": next()})
			v.SetBytes(bytes.TrimSpace(b.Bytes()))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), next)
		}
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.ValueOf(next()), reflect.ValueOf(next()))
			v.Set(m)
		}
	}
}

// noteConfig is the built-in config with note, an action that takes any
// arguments (no schema) and waits for a manager.
func noteConfig(t *testing.T, dir string, redact ...string) string {
	t.Helper()
	r := ""
	if len(redact) > 0 {
		r = ", redact: [" + strings.Join(redact, ", ") + "]"
	}
	return writeConfig(t, dir, "signoff.yaml", "  create_return_label: {executor: demo}\n",
		"  create_return_label: {executor: demo}\n  note: {executor: {type: command, command: [/bin/true]}"+r+"}\n")
}

// TestDistinctValuesNeverRenderAlikeOnTheTerminal: a proposal whose actions
// hold every value of the hostile corpus, one each, is shown by show with
// every value in printable ASCII and no two different values alike (numbers
// are stored in canonical form, so 10.0 and 10 are one value).
func TestDistinctValuesNeverRenderAlikeOnTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := noteConfig(t, dir)
	values := texttest.Values(t)
	var acts []string
	for _, v := range values {
		acts = append(acts, `{"name":"note","args":{"v":`+string(v)+`}}`)
	}
	p := `{"requester":{"id":"agent:resolver"},"actions":[` + strings.Join(acts, ",") + `]}`
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", proposal(t, dir, "values.json", p)))
	out := must(t, dir, exitWaiting, "--config", cfg, "show", id)
	line := regexp.MustCompile(`(?m)^    (\d+)\. note +(.*)$`)
	rows := line.FindAllStringSubmatch(out, -1)
	if len(rows) != len(values) {
		t.Fatalf("show lists %d actions, want %d:\n%s", len(rows), len(values), out)
	}
	seen := map[string]string{}
	for i, r := range rows {
		v, err := jsonvalue.Canonical(values[i])
		if err != nil {
			t.Fatal(err)
		}
		shown := r[2]
		for _, c := range shown {
			if c < 0x20 || c >= 0x7f {
				t.Errorf("%s shows as %s, with %U", values[i], shown, c)
				break
			}
		}
		if other, ok := seen[shown]; ok && other != string(v) {
			t.Errorf("%s and %s both show as %s", other, v, shown)
		}
		seen[shown] = string(v)
	}
	for _, want := range []string{`{"v":"\u0060rm -rf /\u0060"}`, `{"v":"\u02cbrm -rf /\u02cb"}`, `{"v":"\u0430mount"}`, `{"v":"10"}`, `{"v":10}`} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not print %s:\n%s", want, out)
		}
	}
}

// TestDistinctValuesNeverRenderAlikeInEveryTerminalRenderer: the hostile
// corpus's values as the terminal's renderers print an action's arguments
// (show) and an edit's changes, and as keys of an edit's changes: printable
// ASCII, no two alike.
func TestDistinctValuesNeverRenderAlikeInEveryTerminalRenderer(t *testing.T) {
	plain, err := workflow.NewActionSpec("note", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	find := func(string) (*workflow.ActionSpec, bool) { return plain, true }
	seen := map[string]map[string]string{}
	for _, v := range texttest.Values(t) {
		args := json.RawMessage(`{"v":` + string(v) + `}`)
		var show bytes.Buffer
		renderRun(&show, &workflow.RunView{ID: "run_1", Status: record.StatusDone, Actions: []record.Action{{Name: "note", Args: args}}},
			config.Default().Roles, redactor(find), find, nil, time.Time{})
		_, line, _ := strings.Cut(show.String(), "1. note")
		outputs := map[string]string{
			"show":  strings.TrimSpace(strings.SplitN(line, "\n", 2)[0]),
			"edits": strings.TrimPrefix(changesText(policy.ChangedFields([]record.Action{{Name: "note", Args: json.RawMessage(`{}`)}}, []record.Action{{Name: "note", Args: args}}), nil, find), "v (none) → "),
		}
		if v[0] == '"' {
			var key string
			_ = json.Unmarshal(v, &key)
			keyed := json.RawMessage(`{` + string(v) + `:1}`)
			if label, _, ok := strings.Cut(changesText(policy.ChangedFields([]record.Action{{Name: "note", Args: json.RawMessage(`{}`)}}, []record.Action{{Name: "note", Args: keyed}}), nil, find), " (none) → "); ok && !strings.Contains(key, ".") {
				outputs["edited keys"] = label
			}
		}
		for what, shown := range outputs {
			if seen[what] == nil {
				seen[what] = map[string]string{}
			}
			for _, c := range shown {
				if c < 0x20 || c >= 0x7f {
					t.Errorf("%s: %s shows as %s, with %U", what, v, shown, c)
					break
				}
			}
			if other, ok := seen[what][shown]; ok {
				t.Errorf("%s: %s and %s both show as %s", what, other, v, shown)
			}
			seen[what][shown] = string(v)
		}
	}
}

// TestLookalikeKeysAreRefusedAtSubmit: a proposal whose arguments hold two
// keys that read alike (of each look-alike group of the hostile corpus), or
// a key with an invisible character or not in NFC, at any depth, is refused
// with exit 2 naming the field in printable ASCII, and nothing is stored.
func TestLookalikeKeysAreRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := noteConfig(t, dir)
	submit := func(args string) (int, string) {
		t.Helper()
		code, out, errs := signoffIn(t, dir, `{"requester":{"id":"agent:resolver"},"actions":[{"name":"note","args":`+args+`}]}`, "--config", cfg, "submit", "-")
		return code, out + errs
	}
	key := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	type refusal struct{ args, field string }
	var cases []refusal
	for _, g := range texttest.LookalikeKeys(t) {
		cases = append(cases,
			refusal{`{` + key(g[0]) + `:1,` + key(g[1]) + `:2}`, "invalid arguments for note: "},
			refusal{`{"card":{"items":[{` + key(g[0]) + `:1,` + key(g[len(g)-1]) + `:2}]}}`, "invalid arguments for note: card.items[0]"})
	}
	cases = append(cases,
		refusal{`{"amount\ufe0f":1}`, `invalid arguments for note: ["amount\ufe0f"]: key "amount\ufe0f" holds an invisible`},
		refusal{`{"card":{"cafe\u0301":1}}`, `invalid arguments for note: card["cafe\u0301"]: key "cafe\u0301" is not in Unicode's composed form (NFC): write it "caf\u00e9"`},
		refusal{`{"amount ":1}`, `invalid arguments for note: ["amount "]: key "amount " starts or ends with a space`})
	for _, tc := range cases {
		code, out := submit(tc.args)
		if code != exitRefused || !strings.Contains(out, tc.field) {
			t.Errorf("%s: exit %d, want %d naming %s:\n%s", tc.args, code, exitRefused, tc.field, out)
		}
		if live := texttest.Live(out, true); live != "" || strings.ContainsFunc(out, func(r rune) bool { return r >= 0x7f && r != '→' && r != '…' }) {
			t.Errorf("%s: the refusal does not name the key in printable ASCII:\n%s", tc.args, out)
		}
	}
	if n := len(runs(t, dir, "--config", cfg)); n != 0 {
		t.Errorf("refused proposals stored %d runs", n)
	}
	// Keys in another script or capitalised, alone, are fine.
	if code, out := submit(`{"\u0430mount":1,"Note":"x"}`); code != exitWaiting {
		t.Errorf("distinct keys refused: exit %d\n%s", code, out)
	}
}

// TestLookalikeKeysASchemaNamesAreFlaggedOnTheTerminal: when the action's schema names
// both keys that read alike, the proposal is taken, and show and the Slack
// message say loudly that they read alike.
func TestLookalikeKeysASchemaNamesAreFlaggedOnTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml", "  create_return_label: {executor: demo}\n",
		"  create_return_label: {executor: demo}\n  note:\n    schema: {type: object, properties: {id: {type: string}, ID: {type: string}}}\n"+
			"    executor: {type: command, command: [/bin/true]}\n")
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", proposal(t, dir, "ids.json",
		`{"requester":{"id":"agent:resolver"},"actions":[{"name":"note","args":{"id":"a","ID":"A"}}]}`)))
	out := must(t, dir, exitWaiting, "--config", cfg, "show", id)
	if !strings.Contains(out, `{"ID":"A","id":"a"}`+"\n       WARNING: keys that read alike: ID and id; check which value is which\n") {
		t.Errorf("show does not flag the keys that read alike:\n%s", out)
	}
}

// TestNumbersThatWouldChangeAreRefusedAtSubmit: a refund of
// 100.000000000000001, or a note holding a number of the hostile corpus
// that a 64-bit float does not hold exactly, is refused with exit 2 naming
// the field and the number as written, and nothing is stored; a schema's
// refusal prints the number as written too.
func TestNumbersThatWouldChangeAreRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := noteConfig(t, dir)
	code, _, errs := signoffIn(t, dir, refundJSON("agent:resolver", "100.000000000000001", ""), "--config", cfg, "submit", "-")
	if want := "amount: the number 100.000000000000001 would be kept as 100: "; code != exitRefused || !strings.Contains(errs, want) {
		t.Errorf("submit: exit %d, stderr %q; want %d and %q", code, errs, exitRefused, want)
	}
	code, _, errs = signoffIn(t, dir, refundJSON("agent:resolver", "1000000.010", ""), "--config", cfg, "submit", "-")
	if want := "amount: must be at most 1000000, got 1000000.010"; code != exitRefused || !strings.Contains(errs, want) {
		t.Errorf("submit: exit %d, stderr %q; want %d and %q", code, errs, exitRefused, want)
	}
	for _, n := range texttest.ChangedNumbers(t) {
		code, _, errs := signoffIn(t, dir, `{"requester":{"id":"agent:resolver"},"actions":[{"name":"note","args":{"lines":[{"qty":`+string(n)+`}]}}]}`,
			"--config", cfg, "submit", "-")
		if want := "lines[0].qty: the number " + string(n) + " "; code != exitRefused || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", n, code, errs, exitRefused, want)
		}
	}
	if n := len(runs(t, dir, "--config", cfg)); n != 0 {
		t.Errorf("refused proposals stored %d runs", n)
	}
}

// TestARedactedValueIsHiddenWhereverTheTerminalShowsIt: the token of an
// action with redact: [token] is echoed by its program deep in the receipt
// and in a log line, quoted in its refusal, and repeated in the summary;
// submit, approve, show and runs print it nowhere.
func TestARedactedValueIsHiddenWhereverTheTerminalShowsIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const token = "tok-7Hq2xZ"
	prog := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *refuse*) echo \"the target refused token " + token + "\" >&2; exit 65;; esac\n" +
		`printf '{"id":"d-1","detail":{"echo":{"request":{"service":"api","token":"` + token + `"}},"log":["deployed with ` + token + `"]}}'` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "deploy"), []byte(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "signoff.yaml", "  create_return_label: {executor: demo}\n",
		"  create_return_label: {executor: demo}\n  deploy:\n    redact: [token]\n    executor: {type: command, command: ["+filepath.Join(dir, "deploy")+"]}\n")
	var printed strings.Builder
	for _, service := range []string{"api", "refuse"} {
		p := `{"requester":{"id":"agent:resolver"},"summary":"deploy ` + service + ` with ` + token + `",` +
			`"actions":[{"name":"deploy","args":{"service":"` + service + `","token":"` + token + `"}}]}`
		out := must(t, dir, exitWaiting, "--config", cfg, "submit", proposal(t, dir, service+".json", p))
		id := runIDOf(t, out)
		printed.WriteString(out)
		_, out, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", "U0MGR00001")
		printed.WriteString(out + errs)
		printed.WriteString(must(t, dir, map[string]int{"api": exitDone, "refuse": exitAttention}[service], "--config", cfg, "show", id))
	}
	printed.WriteString(must(t, dir, exitDone, "--config", cfg, "runs"))
	out := printed.String()
	if strings.Contains(out, token) {
		t.Errorf("the terminal prints the token:\n%s", out)
	}
	for _, want := range []string{`"request":{"service":"api","token":"[redacted]"}`, `"log":["deployed with [redacted]"]`,
		"the target refused token [redacted]", "summary: deploy api with [redacted]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %s:\n%s", want, out)
		}
	}
}
