package bot

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// threadCases are the replies and messages besides the approval message:
// what goes in its thread (details, a reminder, an escalation) and the
// outcome and digest messages.
func threadCases(t testing.TB) map[string]func() ([]slack.Block, string) {
	rc := goldenContext(t)
	hostile := "<!channel> *Approved by finance* `x` \u202e"
	return map[string]func() ([]slack.Block, string){
		"detail_submitted": func() ([]slack.Block, string) {
			v := refundView()
			v.Evidence = append(v.Evidence, record.Evidence{Source: hostile, Data: json.RawMessage(`"` + strings.Repeat("long ", 200) + `"`)})
			v.Checks = append(v.Checks, record.Check{Action: 0, Name: "shop_lookup", Error: hostile})
			return RenderDetail(v, Detail{What: detailSubmitted}, "")
		},
		"detail_rejected": func() ([]slack.Block, string) {
			v := reshipView()
			v.Decisions = []workflow.DecisionView{{RequestID: gReqID3, By: leadOmar, Role: "team_lead", Decision: record.VerdictReject, Reason: hostile, At: ts(gCreated)}}
			return RenderDetail(v, Detail{What: detailDecision}, "")
		},
		"detail_edited": func() ([]slack.Block, string) {
			v := refundView()
			v.Decisions = []workflow.DecisionView{{RequestID: gReqID, By: leadGrace, Role: "team_lead", Decision: record.VerdictApprove,
				Reason: "keep the 19.00 shipping", Edited: json.RawMessage(`{"amount":100}`), At: ts(gCreated)}}
			before := []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"amount":119,"payment_id":"PAY-1"}`)}}
			after := []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"amount":100,"payment_id":"PAY-2"}`)}}
			return RenderDetail(v, Detail{What: detailDecision}, changesLine(policy.ChangedFields(before, after), after, goldenSpecs(t)))
		},
		"detail_attempt": func() ([]slack.Block, string) {
			return RenderDetail(approved(refundView()), Detail{What: detailAttempt, Attempt: 1}, "")
		},
		"detail_receipt": func() ([]slack.Block, string) {
			return RenderDetail(done(refundView()), Detail{What: detailReceipt}, "")
		},
		"detail_outcome": func() ([]slack.Block, string) {
			return RenderDetail(done(refundView()), Detail{What: detailOutcome, Status: record.StatusDone}, "")
		},
		"reminder": func() ([]slack.Block, string) {
			v := refundView()
			return RenderReminder(v, v.Requests[0], record.ReminderRecord{Before: 3600, Mention: []string{leadGrace, leadOmar}}, rc.Now)
		},
		"escalation": func() ([]slack.Block, string) {
			v := refundView()
			return RenderEscalation(v, v.Requests[0], []record.EscalationRecord{{Role: "manager", Extended: 3600}}, rc.Now)
		},
		"outcome_dm": func() ([]slack.Block, string) {
			return RenderOutcome(done(refundView()), OutcomeNote{ToRequester: true, Link: "https://example.slack.com/archives/C1/p1", Now: rc.Now})
		},
		"digest": func() ([]slack.Block, string) {
			return RenderDigest([]*workflow.RunView{refundView(), reshipView()}, 3, rc.Now)
		},
	}
}

func TestThreadGolden(t *testing.T) {
	for name, mk := range threadCases(t) {
		t.Run(name, func(t *testing.T) {
			blocks, text := mk()
			checkLimits(t, blocks)
			golden(t, filepath.Join("thread", name+".json"), marshalPretty(t, map[string]any{"text": text, "blocks": blocks}))
		})
	}
}

// goldenFiles are the golden files of every message and view the bot
// builds, by kind: messages ({"text", "blocks"}) and modals.
func goldenFiles(t testing.TB) (messages, modals []string) {
	t.Helper()
	for _, dir := range []string{"render", "thread"} {
		m, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if err != nil || len(m) == 0 {
			t.Fatalf("no goldens in testdata/%s: %v", dir, err)
		}
		messages = append(messages, m...)
	}
	modals, err := filepath.Glob(filepath.Join("testdata", "modals", "*.json"))
	if err != nil || len(modals) == 0 {
		t.Fatalf("no modal goldens: %v", err)
	}
	return messages, modals
}

// Every golden message and modal is within Slack's Block Kit limits, read
// back from the file as Slack would get it.
func TestGoldensAreWithinSlackLimits(t *testing.T) {
	messages, modals := goldenFiles(t)
	for _, path := range messages {
		t.Run(path, func(t *testing.T) {
			var m struct {
				Blocks []map[string]any `json:"blocks"`
			}
			readJSON(t, path, &m)
			if len(m.Blocks) == 0 {
				t.Fatal("no blocks")
			}
			checkBlockList(t, m.Blocks, MaxBlocks)
		})
	}
	for _, path := range modals {
		t.Run(path, func(t *testing.T) {
			var v slack.ModalViewRequest
			readJSON(t, path, &v)
			checkModal(t, v)
		})
	}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// blockkitDir holds the pinned @slack/types and typescript (package.json,
// package-lock.json; npm ci installs them).
const blockkitDir = "testdata/blockkit"

// tscOrSkip is the pinned TypeScript compiler. Without node or the
// installed packages the test is skipped, unless SIGNOFF_REQUIRE_BLOCKKIT
// is set (as CI does), where it fails.
func tscOrSkip(t *testing.T) string {
	t.Helper()
	tsc, err := filepath.Abs(filepath.Join(blockkitDir, "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, tscErr := os.Stat(tsc)
	if nodeErr == nil && tscErr == nil {
		return tsc
	}
	msg := fmt.Sprintf("Block Kit type check needs node and the packages of bot/%s (cd bot/%s && npm ci): node: %v; tsc: %v", blockkitDir, blockkitDir, nodeErr, tscErr)
	if os.Getenv("SIGNOFF_REQUIRE_BLOCKKIT") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// tsFile wraps JSON as a TypeScript module whose one constant has the
// type typ of @slack/types: an object literal, so that the compiler checks
// each block against the union and refuses unknown properties (a .json
// import would widen "type" to string).
func tsFile(typ, json string) string {
	return fmt.Sprintf("import type { %s } from \"@slack/types\";\nexport const x: %s = %s;\n", strings.TrimSuffix(typ, "[]"), typ, json)
}

// typeCheck runs tsc (strict, nodenext) over files (name → source) in a
// directory of its own under blockkitDir, where @slack/types resolves, and
// returns its output and whether it passed.
func typeCheck(t *testing.T, tsc string, files map[string]string) (string, bool) {
	t.Helper()
	dir, err := os.MkdirTemp(blockkitDir, "check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "types": []}, "include": ["*.ts"]}`
	files["tsconfig.json"] = config
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(tsc, "--noEmit", "-p", ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("run tsc: %v", err)
	}
	return string(out), err == nil
}

// Every golden message type-checks as KnownBlock[] and every modal as
// ModalView of Slack's published types (@slack/types): no unknown block,
// element or property, nothing required missing.
func TestGoldensTypeCheckAgainstSlackTypes(t *testing.T) {
	tsc := tscOrSkip(t)
	messages, modals := goldenFiles(t)
	files := map[string]string{}
	add := func(path, typ string, body any) {
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		name := strings.NewReplacer("/", "_", ".json", ".ts").Replace(strings.TrimPrefix(path, "testdata/"))
		files[name] = tsFile(typ, string(b))
	}
	for _, path := range messages {
		var m struct {
			Blocks json.RawMessage `json:"blocks"`
		}
		readJSON(t, path, &m)
		add(path, "KnownBlock[]", m.Blocks)
	}
	for _, path := range modals {
		var v json.RawMessage
		readJSON(t, path, &v)
		add(path, "ModalView", v)
	}
	if out, ok := typeCheck(t, tsc, files); !ok {
		t.Fatalf("the goldens do not type-check against @slack/types:\n%s", out)
	}
}

// The type check fails on what Slack would refuse: a misspelt block or
// element type, a property Slack does not know, a button without text.
func TestTheTypeCheckCatchesMistakes(t *testing.T) {
	tsc := tscOrSkip(t)
	for name, tc := range map[string]struct{ typ, body, want string }{
		"misspelt element": {"KnownBlock[]", `[{"type": "actions", "elements": [{"type": "buton", "action_id": "a", "text": {"type": "plain_text", "text": "Go"}}]}]`, "buton"},
		"misspelt block":   {"KnownBlock[]", `[{"type": "sektion", "text": {"type": "mrkdwn", "text": "x"}}]`, "sektion"},
		"unknown property": {"KnownBlock[]", `[{"type": "section", "colour": "red", "text": {"type": "mrkdwn", "text": "x"}}]`, "colour"},
		"button no text":   {"KnownBlock[]", `[{"type": "actions", "elements": [{"type": "button", "action_id": "a"}]}]`, "text"},
		"modal no title":   {"ModalView", `{"type": "modal", "blocks": []}`, "title"},
	} {
		t.Run(name, func(t *testing.T) {
			out, ok := typeCheck(t, tsc, map[string]string{"bad.ts": tsFile(tc.typ, tc.body)})
			if ok || !strings.Contains(out, tc.want) {
				t.Fatalf("tsc passed, or did not name %q:\n%s", tc.want, out)
			}
		})
	}
}
