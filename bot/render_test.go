package bot

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// -update rewrites the golden files under testdata/ instead of comparing.
// The flag may be registered by another test file of the package first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata")
	}
}

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares got with testdata/name byte for byte, or rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updatingGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./bot -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is intended.\n--- got ---\n%s", path, got)
	}
}

// marshalPretty is JSON as Slack gets it, indented, without HTML escaping so
// that the golden files read like the messages.
func marshalPretty(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The example run: the double charge of fixtures/proposals/refund-double-charge.json.
const (
	gRunID   = "run_01a22a03beb60001db0e0344"
	gReqID   = "req_01a22a03beb70002c0ffee01"
	gReq2ID  = "req_01a22a03bf100003c0ffee02"
	gFP      = "9b572d7ad2cda9645d0e67783e00a818799d1233f093204d82b0be5dde3d2b40"
	gFP2     = "4e1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0"
	gRunID2  = "run_01a22a03bee60003e884eee8"
	gReqID3  = "req_01a22a03bee70004e884eee9"
	gFP3     = "65505b8cc15f555162a56fdf5bad73743f390c664b25f0a1c817796b2180085e"
	gPolicy  = "2026-11-29.1"
	gCreated = "2026-11-30T09:00:00Z"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func tp(s string) *time.Time { t := ts(s); return &t }

func goldenRoles(t testing.TB) *policy.Roles {
	r, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "team_lead", Members: []string{leadGrace, leadOmar}},
		{Name: "manager", Members: []string{manager}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// goldenContext redacts payment_id of refunds, as a config with
// `request_refund: {redact: [payment_id]}` would.
func goldenContext(t testing.TB) RenderContext {
	return RenderContext{
		Roles:  goldenRoles(t),
		Redact: Redactor(goldenSpecs(t)),
		Now:    ts("2026-11-30T12:30:00Z"),
	}
}

// goldenSpecs are the actions of the golden messages: the refund's
// payment_id is redacted.
func goldenSpecs(t testing.TB) specMap {
	spec, err := workflow.NewActionSpec("request_refund", nil, nil, []string{"payment_id"})
	if err != nil {
		t.Fatal(err)
	}
	plainSpec, _ := workflow.NewActionSpec("any", nil, nil, nil)
	return specMap{"request_refund": spec, "reship_item": plainSpec, "create_return_label": plainSpec, "mcp:files.write_file": plainSpec}
}

type specMap map[string]*workflow.ActionSpec

func (m specMap) Action(name string) (*workflow.ActionSpec, bool) { s, ok := m[name]; return s, ok }

func refundView() *workflow.RunView {
	deadline := tp("2026-12-03T09:00:00Z")
	return &workflow.RunView{
		ID: gRunID, Workflow: "recorded-agent", TaskID: "T-65273", Status: record.StatusWaitingApproval,
		Requester: record.Person{ID: "agent:resolver", Name: "Resolver agent"},
		Summary:   "LK-507862 was charged twice (PAY-507862-1 and PAY-507862-2, 119.00 CAD each) for one lamp worth 119.00 CAD. Refund the duplicate charge PAY-507862-2 in full.",
		Step:      3, ModelCalls: 3, Fingerprint: gFP,
		Actions: []record.Action{{Name: "request_refund",
			Args: json.RawMessage(`{"amount":119,"currency":"CAD","order_id":"LK-507862","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`)}},
		Evidence: []record.Evidence{
			{Source: "get_order", Data: json.RawMessage(`{"id":"LK-507862","customer":"Maëlle Tremblay","status":"delivered","currency":"CAD","total":"119.00","items":[{"sku":"DESKLAMP","quantity":1}]}`)},
			{Source: "get_payments", Data: json.RawMessage(`{"order_id":"LK-507862","payments":[{"id":"PAY-507862-1","amount":"119.00","status":"captured"},{"id":"PAY-507862-2","amount":"119.00","status":"captured"}]}`)},
		},
		Checks: []record.Check{{Action: 0, Name: "request_refund", OK: true, Attempts: 1}},
		Gate: &record.Gate{Rule: "large-refund", Risk: record.RiskHigh, PolicyRevision: gPolicy,
			Approval:    &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600, Edit: true},
			Fingerprint: gFP, RequestID: gReqID, Deadline: deadline},
		Requests: []workflow.RequestView{{ID: gReqID, Status: record.RequestPending, Fingerprint: gFP, Rule: "large-refund",
			PolicyRevision: gPolicy, Risk: record.RiskHigh, Role: "team_lead", Count: 1, Deadline: *deadline}},
		Decisions: []workflow.DecisionView{}, Operations: []workflow.OperationView{},
		Deadline: deadline, CreatedAt: ts(gCreated), UpdatedAt: ts(gCreated),
	}
}

func approved(v *workflow.RunView) *workflow.RunView {
	v.Status, v.Deadline = record.StatusExecuting, nil
	at := ts("2026-11-30T11:42:10Z")
	v.Requests[0].Status, v.Requests[0].DecidedBy, v.Requests[0].DecidedAt = record.RequestApproved, leadGrace, &at
	v.Decisions = append(v.Decisions, workflow.DecisionView{RequestID: v.Gate.RequestID, By: leadGrace, Name: "grace", Role: "team_lead",
		Decision: record.VerdictApprove, Via: "slack", At: at})
	return v
}

// stepUp makes v's rule one of confirm: web (a sign-in within 5 minutes).
func stepUp(v *workflow.RunView) *workflow.RunView {
	a := *v.Gate.Approval
	a.StepUp = 300
	v.Gate.Approval = &a
	return v
}

func done(v *workflow.RunView) *workflow.RunView {
	v = approved(v)
	v.Status = record.StatusDone
	v.Operations = []workflow.OperationView{{Key: v.ID + "/1", Action: "request_refund", Status: record.OpCommitted, Attempts: 1,
		Receipt: json.RawMessage(`{"id":"RF-576FE9B369","detail":{"amount":"119.00","refund_id":"RF-576FE9B369"}}`)}}
	return v
}

func reshipView() *workflow.RunView {
	deadline := tp("2026-12-03T09:00:00Z")
	return &workflow.RunView{
		ID: gRunID2, Workflow: "recorded-agent", TaskID: "T-90103", Status: record.StatusWaitingApproval,
		Requester:   record.Person{ID: "agent:resolver", Name: "Resolver agent"},
		Summary:     "The PLANTER of LK-640436 arrived cracked. Reship one PLANTER and send a free return label for the damaged one.",
		Fingerprint: gFP3,
		Actions: []record.Action{
			{Name: "reship_item", Args: json.RawMessage(`{"order_id":"LK-640436","quantity":1,"sku":"PLANTER"}`)},
			{Name: "create_return_label", Args: json.RawMessage(`{"free_shipping":true,"order_id":"LK-640436","reason":"damaged","sku":"PLANTER"}`)},
		},
		Evidence: []record.Evidence{{Source: "get_order", Data: json.RawMessage(`{"id":"LK-640436","customer":"Jonas Whitfield","items":[{"sku":"PLANTER","description":"Glazed stoneware planter, 30 cm"}]}`)}},
		Gate: &record.Gate{Rule: "reship", Risk: record.RiskMedium, PolicyRevision: gPolicy,
			Approval:    &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600},
			Fingerprint: gFP3, RequestID: gReqID3, Deadline: deadline, Assignee: leadOmar},
		Requests: []workflow.RequestView{{ID: gReqID3, Status: record.RequestPending, Fingerprint: gFP3, Rule: "reship",
			PolicyRevision: gPolicy, Risk: record.RiskMedium, Role: "team_lead", Count: 1, Deadline: *deadline}},
		Deadline: deadline, CreatedAt: ts(gCreated), UpdatedAt: ts(gCreated),
	}
}

// goldenCases are the approval message at every point of a run's life.
func goldenCases(t testing.TB) map[string]func() (*workflow.RunView, RenderContext) {
	rc := goldenContext(t)
	return map[string]func() (*workflow.RunView, RenderContext){
		"waiting_high_risk": func() (*workflow.RunView, RenderContext) { return refundView(), rc },
		"waiting_assigned_with_groups": func() (*workflow.RunView, RenderContext) {
			c := rc
			c.UserGroups = map[string]string{"team_lead": "S0LEADS001", "manager": "S0MGRS0001"}
			return reshipView(), c
		},
		"waiting_past_deadline": func() (*workflow.RunView, RenderContext) {
			c := rc
			c.Now = ts("2026-12-03T09:00:01Z")
			return refundView(), c
		},
		"executing": func() (*workflow.RunView, RenderContext) { return approved(refundView()), rc },
		"done":      func() (*workflow.RunView, RenderContext) { return done(refundView()), rc },
		"scheduled": func() (*workflow.RunView, RenderContext) { return scheduled(approved(refundView())), rc },
		"waiting_with_window": func() (*workflow.RunView, RenderContext) {
			v := scheduled(refundView())
			v.Status, v.ScheduledFor = record.StatusWaitingApproval, nil
			return v, rc
		},
		"rejected": func() (*workflow.RunView, RenderContext) {
			v := reshipView()
			at := ts("2026-11-30T10:05:00Z")
			v.Status, v.Deadline = record.StatusRejected, nil
			v.Reason = "rejected by U0LEAD0002: photo shows the box only; ask for a picture of the planter"
			v.Requests[0].Status, v.Requests[0].DecidedBy, v.Requests[0].DecidedAt = record.RequestRejected, leadOmar, &at
			v.Decisions = []workflow.DecisionView{{RequestID: gReqID3, By: leadOmar, Role: "team_lead", Decision: record.VerdictReject,
				Reason: "photo shows the box only; ask for a picture of the planter <b>now</b> & then", Via: "slack", At: at}}
			return v, rc
		},
		"expired": func() (*workflow.RunView, RenderContext) {
			v := refundView()
			v.Status, v.Deadline = record.StatusExpired, nil
			v.Reason = "no decision before the deadline 2026-12-03T09:00:00Z"
			v.Requests[0].Status, v.Requests[0].DecidedAt = record.RequestExpired, tp("2026-12-03T09:00:05Z")
			return v, rc
		},
		"cancelled": func() (*workflow.RunView, RenderContext) {
			v := refundView()
			at := ts("2026-11-30T09:30:00Z")
			v.Status, v.Deadline = record.StatusCancelled, nil
			v.Reason = "cancelled by U0MGR00001: customer withdrew the complaint"
			v.Requests[0].Status, v.Requests[0].DecidedBy, v.Requests[0].DecidedAt = record.RequestCancelled, manager, &at
			return v, rc
		},
		"needs_attention": func() (*workflow.RunView, RenderContext) {
			v := approved(refundView())
			v.Status = record.StatusNeedsAttention
			v.Reason = "request_refund: the outcome of run_01a22a03beb60001db0e0344/1 cannot be proven: shop unreachable"
			v.Operations = []workflow.OperationView{{Key: v.ID + "/1", Action: "request_refund", Status: record.OpUnknown, Attempts: 3, Error: "lookup: shop unreachable"}}
			return v, rc
		},
		"edited_executing": func() (*workflow.RunView, RenderContext) {
			v := refundView()
			at := ts("2026-11-30T11:50:00Z")
			v.Status, v.Deadline, v.Fingerprint = record.StatusExecuting, nil, gFP2
			v.Actions[0].Args = json.RawMessage(`{"amount":100,"currency":"CAD","order_id":"LK-507862","payment_id":"PAY-507862-2","reason_code":"RFD-DOUBLE"}`)
			v.Gate = &record.Gate{Rule: "large-refund", Risk: record.RiskHigh, PolicyRevision: gPolicy,
				Approval: v.Gate.Approval, Fingerprint: gFP2, RequestID: gReq2ID}
			v.Requests[0].Status, v.Requests[0].DecidedBy, v.Requests[0].DecidedAt = record.RequestSuperseded, leadGrace, &at
			v.Requests = append(v.Requests, workflow.RequestView{ID: gReq2ID, Status: record.RequestApproved, Fingerprint: gFP2,
				Rule: "large-refund", PolicyRevision: gPolicy, Risk: record.RiskHigh, Role: "team_lead", Count: 1,
				Deadline: ts("2026-12-03T11:50:00Z"), DecidedBy: leadGrace, DecidedAt: &at})
			v.Decisions = []workflow.DecisionView{
				{RequestID: gReqID, By: leadGrace, Role: "team_lead", Decision: record.VerdictApprove, Reason: "keep the 19.00 shipping",
					Edited: json.RawMessage(`{"amount":100}`), Via: "slack", At: at},
				{RequestID: gReq2ID, By: leadGrace, Role: "team_lead", Decision: record.VerdictApprove, Via: "slack", At: at},
			}
			return v, rc
		},
		"integrity_problem": func() (*workflow.RunView, RenderContext) {
			v := refundView()
			v.Problem = "run run_01a22a03beb60001db0e0344: checkpoint 4: hash does not match its content"
			return v, rc
		},
		"waiting_composite": func() (*workflow.RunView, RenderContext) { return compositeView(), rc },
		"waiting_mcp_call":  func() (*workflow.RunView, RenderContext) { return mcpCallView(), mcpCallContext(t) },
		"waiting_not_whole": func() (*workflow.RunView, RenderContext) { return withArgs(refundView(), decoyArgs()), rc },
		"waiting_step_up": func() (*workflow.RunView, RenderContext) {
			c := rc
			c.ConsoleURL = "https://signoff.example.com/ui"
			return stepUp(refundView()), c
		},
		"waiting_step_up_no_console": func() (*workflow.RunView, RenderContext) { return stepUp(reshipView()), rc },
		"executing_step_up": func() (*workflow.RunView, RenderContext) {
			c := rc
			c.ConsoleURL = "https://signoff.example.com/ui"
			v := approved(stepUp(refundView()))
			v.Decisions[0].Via = record.ViaWeb
			return v, c
		},
		"hidden_arguments": func() (*workflow.RunView, RenderContext) {
			c := rc
			c.Redact = nil
			return refundView(), c
		},
	}
}

func TestRenderGolden(t *testing.T) {
	for name, mk := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			v, rc := mk()
			blocks := RenderRun(v, rc)
			checkLimits(t, blocks)
			golden(t, filepath.Join("render", name+".json"), marshalPretty(t, map[string]any{
				"text": FallbackText(v), "blocks": blocks,
			}))
		})
	}
}

func TestModalsGolden(t *testing.T) {
	rc := goldenContext(t)
	v := refundView()
	ref := refOf(v)
	for name, view := range map[string]slack.ModalViewRequest{
		"reject": rejectModal(v, ref),
		"edit":   editModal(v, ref, rc.Redact),
	} {
		t.Run(name, func(t *testing.T) {
			checkModal(t, view)
			golden(t, filepath.Join("modals", name+".json"), marshalPretty(t, view))
		})
	}
}

// TestEditModalSaysPolicyChecksTheEditAgain: the editor is told, before
// they submit, that the edited arguments go through policy again and may
// need another approval, or run at once.
func TestEditModalSaysPolicyChecksTheEditAgain(t *testing.T) {
	rc := goldenContext(t)
	v := refundView()
	b, err := json.Marshal(editModal(v, refOf(v), rc.Redact).Blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Policy checks the edited arguments again", "may need another approval", "run at once if policy allows them"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the edit modal does not say %q:\n%s", want, b)
		}
	}
}

// TestButtons checks what the decision depends on: the values, the confirm
// on high risk only, and Edit only where the rule allows it.
func TestButtons(t *testing.T) {
	rc := goldenContext(t)
	for _, tc := range []struct {
		name        string
		view        *workflow.RunView
		wantIDs     []string
		wantConfirm bool
	}{
		{"high risk with edit", refundView(), []string{ActionApprove, ActionReject, ActionEdit}, true},
		{"medium risk without edit", reshipView(), []string{ActionApprove, ActionReject}, false},
		{"decided", approved(refundView()), nil, false},
		// What a message cannot show whole, it cannot approve: Reject only.
		{"an argument too long to show", withArgs(refundView(), `{"amount":119,"note":"`+strings.Repeat("n", maxArgValue+1)+`"}`), []string{ActionReject}, false},
		// Escaped, each character of another script takes six: a note of 80
		// is still shown whole, and may be approved.
		{"a note of 80 Japanese characters", withArgs(refundView(), `{"amount":119,"note":"`+strings.Repeat("返金", 40)+`"}`), []string{ActionApprove, ActionReject, ActionEdit}, true},
		{"a key too long to show", withArgs(refundView(), `{"amount":119,"`+strings.Repeat("k", 61)+`":1}`), []string{ActionReject}, false},
		{"a decoy that pushes the real amount past the cut", withArgs(refundView(), decoyArgs()), []string{ActionReject}, false},
		{"more actions than a message holds", manyActions(refundView(), maxActionSections+1), []string{ActionReject}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var acts *slack.ActionBlock
			for _, b := range RenderRun(tc.view, rc) {
				if a, ok := b.(*slack.ActionBlock); ok {
					acts = a
				}
			}
			if tc.wantIDs == nil {
				if acts != nil {
					t.Fatalf("buttons on a %s run", tc.view.Status)
				}
				return
			}
			if acts == nil {
				t.Fatal("no buttons")
			}
			var ids []string
			for _, el := range acts.Elements.ElementSet {
				b := el.(*slack.ButtonBlockElement)
				ids = append(ids, b.ActionID)
				ref, err := ParseRef(b.Value)
				if err != nil || ref != refOf(tc.view) {
					t.Errorf("%s value %q: %+v, %v", b.ActionID, b.Value, ref, err)
				}
				if b.ActionID == ActionApprove && (b.Confirm != nil) != tc.wantConfirm {
					t.Errorf("approve confirm = %v, want %v", b.Confirm != nil, tc.wantConfirm)
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.wantIDs) {
				t.Errorf("buttons %v, want %v", ids, tc.wantIDs)
			}
		})
	}
}

// withArgs is v with its one action's arguments replaced.
func withArgs(v *workflow.RunView, args string) *workflow.RunView {
	v.Actions[0].Args = json.RawMessage(args)
	return v
}

// decoyArgs are arguments an agent could write so that a capitalised decoy
// sorts first and long fillers push the real amount past what a message
// shows.
func decoyArgs() string {
	var b strings.Builder
	b.WriteString(`{"Amount":"1.00"`)
	for i := range 12 {
		fmt.Fprintf(&b, `,"a%02d":"%s"`, i, strings.Repeat("x", 150)) // between "Amount" and "amount"
	}
	b.WriteString(`,"amount":119}`)
	return b.String()
}

// manyActions is v proposing n copies of its first action.
func manyActions(v *workflow.RunView, n int) *workflow.RunView {
	for len(v.Actions) < n {
		v.Actions = append(v.Actions, v.Actions[0])
	}
	return v
}

// TestAMessageThatCannotShowItAllSaysWhere: without its Approve button, the
// message says why and where to see the run whole, and never shows the cut
// argument as if it were all there was.
func TestAMessageThatCannotShowItAllSaysWhere(t *testing.T) {
	rc := goldenContext(t)
	for name, v := range map[string]*workflow.RunView{
		"decoy":        withArgs(refundView(), decoyArgs()),
		"many actions": manyActions(refundView(), maxActionSections+1),
	} {
		t.Run(name, func(t *testing.T) {
			blocks := RenderRun(v, rc)
			checkLimits(t, blocks)
			raw, err := json.Marshal(blocks)
			if err != nil {
				t.Fatal(err)
			}
			text := string(raw)
			if !strings.Contains(text, "cannot be approved here") || !strings.Contains(text, "signoff show "+v.ID) {
				t.Errorf("no notice naming signoff show %s:\n%s", v.ID, text)
			}
			if strings.Contains(text, "/runs show") {
				t.Errorf("points to /runs show, which shows no more:\n%s", text)
			}
		})
	}
}

// TestArgumentKeysAreInert: a key is written by the agent, so it is shown
// in a code span, where mrkdwn (bold, emoji, links) means nothing.
func TestArgumentKeysAreInert(t *testing.T) {
	v := withArgs(refundView(), `{"amount":119,"*Approved* :white_check_mark: <https://e.x|ok>":1}`)
	text, _ := actionText(0, v.Actions[0], goldenContext(t))
	if !strings.Contains(text, "• `\"*Approved* :white_check_mark: \\u003chttps://e.x|ok\\u003e\"`: `1`") {
		t.Errorf("the key is not shown literally in a code span:\n%s", text)
	}
}

// TestArgumentValuesShowTheirType: each argument reads as the JSON value it
// is, so that no two of them look alike: a string in quotes, a number, a
// boolean or null bare, a string holding JSON unlike the object it spells,
// and the empty string unlike nothing.
func TestArgumentValuesShowTheirType(t *testing.T) {
	v := withArgs(refundView(), `{"b":false,"b_str":"false","n":10,"n_str":"10","o":{"x":1},"o_str":"{\"x\":1}",`+
		`"z":null,"z_str":"null","e":"","a":[1,"1"]}`)
	rc := goldenContext(t)
	rc.Redact = func(_ string, args json.RawMessage) json.RawMessage { return args }
	text, whole := actionText(0, v.Actions[0], rc)
	want := []string{
		"• `a`: `[1,\"1\"]`",
		"• `b`: `false`", "• `b_str`: `\"false\"`",
		"• `e`: `\"\"`",
		"• `n`: `10`", "• `n_str`: `\"10\"`",
		"• `o`: `{\"x\":1}`", "• `o_str`: `\"{\\\"x\\\":1}\"`",
		"• `z`: `null`", "• `z_str`: `\"null\"`",
	}
	if got := strings.Split(text, "\n")[1:]; !whole || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the arguments read (whole %v):\n%s\nwant:\n%s", whole, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	spec, err := workflow.NewActionSpec("request_refund", nil, nil, []string{"b_str"})
	if err != nil {
		t.Fatal(err)
	}
	rc.Redact = Redactor(specMap{"request_refund": spec})
	if text, _ := actionText(0, v.Actions[0], rc); !strings.Contains(text, "• `b_str`: `\"[redacted]\"`") {
		t.Errorf("a hidden argument does not read as hidden:\n%s", text)
	}
}

// TestLookalikeKeysAreFlagged: keys that read alike (which submit takes only
// when the schema names both) are named first in the action's section, at
// the top and nested, before any argument a cut could drop.
func TestLookalikeKeysAreFlagged(t *testing.T) {
	v := withArgs(refundView(), `{"ID":"A","amount":119,"id":"a","items":[{"SKU":1,"sku":2}]}`)
	text, _ := actionText(0, v.Actions[0], goldenContext(t))
	lines := strings.Split(text, "\n")
	want := []string{
		":warning: *Keys that read alike:* `ID` and `id`. Check which value is which.",
		":warning: *Keys that read alike:* `items[0].SKU` and `items[0].sku`. Check which value is which.",
	}
	if len(lines) < 3 || lines[1] != want[0] || lines[2] != want[1] {
		t.Errorf("the keys that read alike are not flagged first:\n%s", text)
	}
	if text, _ := actionText(0, refundView().Actions[0], goldenContext(t)); strings.Contains(text, "read alike") {
		t.Errorf("keys that read apart are flagged:\n%s", text)
	}
}

// TestARedactedValueIsHiddenWhereverTheMessageShowsIt: the payment id, a
// redact: field, is hidden wherever the message would show it: the
// receipt's id the target chose to echo it in, a target's error, the run's
// reason, the requester's summary.
func TestARedactedValueIsHiddenWhereverTheMessageShowsIt(t *testing.T) {
	v := done(refundView())
	v.Operations[0].Receipt = json.RawMessage(`{"id":"PAY-507862-2","detail":{"echo":{"payment_id":"PAY-507862-2"}}}`)
	attention := approved(refundView())
	attention.Status, attention.Reason = record.StatusNeedsAttention, "refused by the target: PAY-507862-2 is locked"
	attention.Operations = []workflow.OperationView{{Key: attention.ID + "/1", Action: "request_refund", Status: record.OpFailed, Attempts: 1,
		Error: "refused by the target: PAY-507862-2 is locked"}}
	for name, v := range map[string]*workflow.RunView{"done": v, "needs attention": attention} {
		out, _ := json.Marshal(RenderRun(v, goldenContext(t)))
		if strings.Contains(string(out), "PAY-507862-2") || !strings.Contains(string(out), "Refund the duplicate charge [redacted] in full.") {
			t.Errorf("%s: the message shows the payment id:\n%s", name, out)
		}
	}
}

func TestRenderRedactsAndEscapes(t *testing.T) {
	v := refundView()
	v.Summary = "refund <@U0EVIL> & <!channel> `now`"
	out, _ := json.Marshal(RenderRun(v, goldenContext(t)))
	s := string(out)
	for _, bad := range []string{"PAY-507862-2\\u0060", "<@U0EVIL>", "<!channel>"} {
		if strings.Contains(s, bad) {
			t.Errorf("message contains %q:\n%s", bad, s)
		}
	}
	if !strings.Contains(s, record.Redaction) {
		t.Errorf("payment_id not redacted:\n%s", s)
	}
	if strings.Contains(s, `payment_id: `+"`PAY-507862-2`") {
		t.Errorf("redacted field shown")
	}
}

func TestFallbackText(t *testing.T) {
	for _, tc := range []struct {
		v    *workflow.RunView
		want string
	}{
		{refundView(), "Approval needed: request_refund (run run_01a22a03beb60001db0e0344, fingerprint 9b572d7ad2cda964)"},
		{done(refundView()), "Done: request_refund (run run_01a22a03beb60001db0e0344, fingerprint 9b572d7ad2cda964)"},
	} {
		if got := FallbackText(tc.v); got != tc.want {
			t.Errorf("FallbackText = %q, want %q", got, tc.want)
		}
	}
}

// longestView is the largest message a realistic proposal could ask for, and
// then some: many actions with many long arguments, long evidence, long names.
func longestView(t testing.TB) (*workflow.RunView, RenderContext) {
	long := func(n int, seed string) string {
		return strings.Repeat(seed, n/len(seed)+1)[:n]
	}
	v := refundView()
	v.Summary = long(8000, "Refund <all> the “double” charges & write to the customer. ")
	v.TaskID = long(400, "T-")
	v.Requester = record.Person{ID: "agent:" + long(300, "resolver-"), Name: long(500, "Résolveur ")}
	v.Actions = nil
	for i := range 60 {
		args := map[string]any{}
		for j := range 40 {
			args[fmt.Sprintf("field_%02d_%s", j, long(80, "k"))] = long(600, "välue<&>`\n ")
		}
		args["nested"] = map[string]any{"list": []any{long(3000, "x"), 1.5, true, nil}}
		b, _ := json.Marshal(args)
		canon, err := jsonvalue.Canonical(b)
		if err != nil {
			t.Fatal(err)
		}
		v.Actions = append(v.Actions, record.Action{Name: fmt.Sprintf("action_%02d_%s", i, long(120, "n")), Args: canon})
	}
	v.Evidence = nil
	for i := range 30 {
		v.Evidence = append(v.Evidence, record.Evidence{Source: fmt.Sprintf("source_%d_%s", i, long(200, "s")),
			Data: json.RawMessage(`{"text":"` + long(10000, "evidence ") + `"}`)})
	}
	v.Gate.Rule = long(300, "rule-")
	v.Gate.PolicyRevision = long(200, "rev")
	v.Gate.Approval.Count = 3
	var members []string
	for i := range 300 {
		members = append(members, fmt.Sprintf("U%09d", i))
	}
	roles, err := policy.NewRoles([]policy.Role{{Name: "team_lead", Members: members}, {Name: "manager", Members: []string{manager}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := goldenContext(t)
	rc.Roles = roles
	rc.UserGroups = map[string]string{"team_lead": "S0LEADS001", "manager": "S0MGRS0001"}
	plainSpec, _ := workflow.NewActionSpec("any", nil, nil, nil)
	rc.Redact = func(string, json.RawMessage) json.RawMessage { return nil }
	rc.Redact = Redactor(anySpec{plainSpec})
	return v, rc
}

type anySpec struct{ s *workflow.ActionSpec }

func (a anySpec) Action(string) (*workflow.ActionSpec, bool) { return a.s, true }

func TestLongestMessageRespectsSlackLimits(t *testing.T) {
	for _, status := range []record.Status{record.StatusWaitingApproval, record.StatusDone, record.StatusNeedsAttention, record.StatusRejected} {
		t.Run(string(status), func(t *testing.T) {
			v, rc := longestView(t)
			v.Status = status
			v.Reason = strings.Repeat("reason <x> ", 1000)
			for i, a := range v.Actions {
				v.Operations = append(v.Operations, workflow.OperationView{Key: fmt.Sprintf("%s/%d", v.ID, i+1), Action: a.Name,
					Status: record.OpFailed, Error: strings.Repeat("refused & ", 200)})
				v.Decisions = append(v.Decisions, workflow.DecisionView{RequestID: gReqID, By: fmt.Sprintf("U%09d", i), Role: "team_lead",
					Decision: record.VerdictReject, Reason: strings.Repeat("no ", 2000), At: ts(gCreated)})
			}
			blocks := RenderRun(v, rc)
			checkLimits(t, blocks)
			if status == record.StatusWaitingApproval {
				if _, ok := blocks[len(blocks)-1].(*slack.ActionBlock); !ok {
					t.Error("the buttons were cut from the longest message")
				}
			}
			if n := len(FallbackText(v)); n > maxFallback {
				t.Errorf("fallback text of %d bytes", n)
			}
			// A click carries the whole message back: it must fit what we accept.
			msg, _ := json.Marshal(map[string]any{"type": "message", "text": FallbackText(v), "blocks": blocks})
			payload := []byte(`{"type":"block_actions","api_app_id":"A0SIGNOFF1","message":` + string(msg) + `}`)
			if len(payload) > MaxPayload {
				t.Errorf("click payload of %d bytes, over MaxPayload %d", len(payload), MaxPayload)
			}
			if body := formBody(payload); len(body) > DefaultMaxBody {
				t.Errorf("click body of %d bytes, over DefaultMaxBody %d", len(body), DefaultMaxBody)
			}
			t.Logf("%d blocks, click payload %d bytes, form body %d bytes", len(blocks), len(payload), len(formBody(payload)))
		})
	}
	t.Run("modals", func(t *testing.T) {
		v, rc := longestView(t)
		checkModal(t, editModal(v, refOf(v), rc.Redact))
		checkModal(t, rejectModal(v, refOf(v)))
	})
}

// slackLen is a length as Slack counts it (JavaScript's UTF-16 units).
func slackLen(s string) int { return len(utf16.Encode([]rune(s))) }

// checkLimits checks blocks against Slack's documented limits, on the JSON
// Slack receives.
func checkLimits(t testing.TB, blocks []slack.Block) {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var bs []map[string]any
	if err := json.Unmarshal(raw, &bs); err != nil {
		t.Fatal(err)
	}
	checkBlockList(t, bs, MaxBlocks)
}

func checkBlockList(t testing.TB, bs []map[string]any, maxBlocks int) {
	t.Helper()
	if len(bs) > maxBlocks {
		t.Errorf("%d blocks, limit %d", len(bs), maxBlocks)
	}
	blockIDs := map[string]bool{}
	ids := map[string]bool{} // action ids, unique in the whole message or view
	text := func(where string, v any, max int) {
		m, _ := v.(map[string]any)
		s, _ := m["text"].(string)
		if s == "" {
			t.Errorf("%s: empty text", where)
		}
		if n := slackLen(s); n > max {
			t.Errorf("%s: text of %d characters, limit %d", where, n, max)
		}
	}
	for i, b := range bs {
		where := fmt.Sprintf("block %d (%s)", i, b["type"])
		if id, _ := b["block_id"].(string); id != "" {
			if blockIDs[id] {
				t.Errorf("%s: block_id %q repeated", where, id)
			}
			blockIDs[id] = true
			if slackLen(id) > MaxBlockID {
				t.Errorf("%s: block_id of %d characters", where, slackLen(id))
			}
		}
		switch b["type"] {
		case "header":
			text(where, b["text"], MaxHeaderText)
		case "section":
			if b["text"] != nil {
				text(where, b["text"], MaxSectionText)
			}
			fields, _ := b["fields"].([]any)
			if len(fields) > MaxFields {
				t.Errorf("%s: %d fields", where, len(fields))
			}
			for j, f := range fields {
				text(fmt.Sprintf("%s field %d", where, j), f, MaxFieldText)
			}
			if b["text"] == nil && len(fields) == 0 {
				t.Errorf("%s: neither text nor fields", where)
			}
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > MaxContextElems {
				t.Errorf("%s: %d elements", where, len(els))
			}
			for j, e := range els {
				text(fmt.Sprintf("%s element %d", where, j), e, MaxSectionText)
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				t.Errorf("%s: %d elements", where, len(els))
			}
			for _, e := range els {
				btn := e.(map[string]any)
				id, _ := btn["action_id"].(string)
				if id == "" || slackLen(id) > MaxActionID || ids[id] {
					t.Errorf("%s: action_id %q empty, too long or repeated", where, id)
				}
				ids[id] = true
				if v, _ := btn["value"].(string); slackLen(v) > MaxButtonValue {
					t.Errorf("%s: button value of %d characters", where, slackLen(v))
				}
				text(where+" button", btn["text"], 75)
				if c, ok := btn["confirm"].(map[string]any); ok {
					text(where+" confirm title", c["title"], 100)
					text(where+" confirm text", c["text"], 300)
					text(where+" confirm button", c["confirm"], 30)
					text(where+" deny button", c["deny"], 30)
				}
			}
		case "input":
			text(where+" label", b["label"], 2000)
			el, _ := b["element"].(map[string]any)
			if iv, _ := el["initial_value"].(string); slackLen(iv) > maxModalInput {
				t.Errorf("%s: initial value of %d characters", where, slackLen(iv))
			}
			if h, ok := b["hint"]; ok {
				text(where+" hint", h, 2000)
			}
		default:
			t.Errorf("%s: a block type this checker does not know", where)
		}
	}
}

// checkModal checks a modal against Slack's limits for views.
func checkModal(t testing.TB, v slack.ModalViewRequest) {
	t.Helper()
	raw, _ := json.Marshal(v)
	var m struct {
		Title, Submit, Close map[string]any
		PrivateMetadata      string           `json:"private_metadata"`
		CallbackID           string           `json:"callback_id"`
		Blocks               []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]map[string]any{"title": m.Title, "submit": m.Submit, "close": m.Close} {
		if s, _ := f["text"].(string); s == "" || slackLen(s) > 24 {
			t.Errorf("modal %s %q: empty or over 24 characters", name, s)
		}
	}
	if slackLen(m.PrivateMetadata) > 3000 || slackLen(m.CallbackID) > 255 {
		t.Errorf("modal metadata of %d, callback id of %d characters", slackLen(m.PrivateMetadata), slackLen(m.CallbackID))
	}
	checkBlockList(t, m.Blocks, 100)
}

// TestReasonsAreInert: a reason someone typed (here an agent that cancelled
// its run through the API) is shown literally in a code span, so mrkdwn in
// it cannot pass for signoff's own words.
func TestReasonsAreInert(t *testing.T) {
	v := refundView()
	at := ts("2026-11-30T09:30:00Z")
	v.Status, v.Deadline = record.StatusCancelled, nil
	v.Reason = "cancelled by agent:resolver: *Approved by finance* :white_check_mark: <https://e.example|ok>"
	v.Requests[0].Status, v.Requests[0].DecidedBy, v.Requests[0].DecidedAt = record.RequestCancelled, "agent:resolver", &at
	raw, err := json.Marshal(RenderRun(v, goldenContext(t)))
	if err != nil {
		t.Fatal(err)
	}
	want := "`*Approved by finance* :white_check_mark: \\u0026lt;https://e.example|ok\\u0026gt;`"
	if !strings.Contains(string(raw), want) {
		t.Errorf("the reason is not shown literally in a code span (want %s):\n%s", want, raw)
	}
}

// TestAStepUpMessageSaysWhereToConfirm: while a step-up rule's run waits,
// its message says a click here is not yet an approval and links to the
// run's page at the configured console, escaped so the link goes exactly
// there; without a console address it says so in words; once the run is
// decided, or for a rule without step-up, it says nothing of it.
func TestAStepUpMessageSaysWhereToConfirm(t *testing.T) {
	page := "https://signoff.example.com/ui/runs/" + gRunID
	for _, tc := range []struct {
		name    string
		view    func() *workflow.RunView
		console string
		want    []string // in the message; nil: no step-up line
		dialog  string   // in the Approve button's dialog
	}{
		{name: "with the console", view: func() *workflow.RunView { return stepUp(refundView()) }, console: "https://signoff.example.com/ui",
			want: []string{"after a sign-in within 5m", "a Slack session alone cannot approve", "<" + page + "|approve or confirm on the run's page>"}, dialog: "only once you confirm it on signoff's web console"},
		{name: "without a console address", view: func() *workflow.RunView { return stepUp(reshipView()) },
			want: []string{"on signoff's web console after a sign-in within 5m", "run `" + gRunID2 + "`'s page there"}, dialog: "only once you confirm it"},
		{name: "a console address with markup", view: func() *workflow.RunView { return stepUp(refundView()) }, console: "https://x.example/a|b<c>&d",
			want: []string{"<https://x.example/a%7Cb%3Cc%3E&amp;d/runs/" + gRunID + "|approve or confirm"}},
		{name: "a shorter max age", view: func() *workflow.RunView { v := stepUp(refundView()); v.Gate.Approval.StepUp = 90; return v },
			want: []string{"within 1m30s"}},
		{name: "decided", view: func() *workflow.RunView { return approved(stepUp(refundView())) }, console: "https://signoff.example.com/ui"},
		{name: "past its deadline", view: func() *workflow.RunView { v := stepUp(refundView()); v.Deadline = tp("2026-11-30T12:00:00Z"); return v }},
		{name: "no step-up", view: refundView, console: "https://signoff.example.com/ui"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := goldenContext(t)
			rc.ConsoleURL = tc.console
			blocks := RenderRun(tc.view(), rc)
			checkLimits(t, blocks)
			// As Slack reads it: slack-go's blocks escape <, > and & in JSON.
			got := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(marshalPretty(t, blocks)))
			if tc.want == nil {
				if strings.Contains(got, "count only once confirmed") || strings.Contains(got, "you confirm it") {
					t.Fatalf("the message speaks of confirming:\n%s", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the message does not say %q:\n%s", w, got)
				}
			}
			// The line sits just above the buttons.
			ctx, ok := blocks[len(blocks)-2].(*slack.ContextBlock)
			if !ok || !strings.Contains(ctx.ContextElements.Elements[0].(*slack.TextBlockObject).Text, ":lock:") {
				t.Errorf("the block above the buttons is not the step-up line: %#v", blocks[len(blocks)-2])
			}
			if tc.dialog != "" {
				approve := blocks[len(blocks)-1].(*slack.ActionBlock).Elements.ElementSet[0].(*slack.ButtonBlockElement)
				if approve.Confirm == nil || !strings.Contains(approve.Confirm.Text.Text, tc.dialog) {
					t.Errorf("the Approve dialog does not say %q: %+v", tc.dialog, approve.Confirm)
				}
			}
		})
	}
}
