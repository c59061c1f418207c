package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

var teamLead72h = &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 72 * 3600, Edit: true}

func shopRules() []Rule {
	return []Rule{
		{Name: "large-refund", When: `action.name == "request_refund" && double(action.args.amount) > 50.0`, Risk: record.RiskHigh, Approval: teamLead72h},
		{Name: "reship", When: `action.name == "reship_item"`, Risk: record.RiskMedium, Approval: &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600}},
		{Name: "free-label", When: `action.name == "create_return_label" && action.args.free_shipping == true`, Risk: record.RiskLow},
		{Name: "small-refund", When: `action.name == "request_refund"`, Risk: record.RiskLow},
		{Name: "everything-else", When: "true", Risk: record.RiskHigh, Approval: &record.ApprovalSpec{Role: "manager", Count: 1, Expires: 86400}},
	}
}

func shopPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := New("2026-11-29.1", shopRules(), shopRoles(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func act(name, args string) record.Action {
	return record.Action{Name: name, Args: json.RawMessage(args)}
}

func TestPolicyFirstMatchWins(t *testing.T) {
	p := shopPolicy(t)
	if p.Revision() != "2026-11-29.1" {
		t.Errorf("Revision() = %q", p.Revision())
	}
	tests := []struct {
		name   string
		action record.Action
		rule   string
		risk   record.Risk
		role   string // "" when no approval
	}{
		{"amount as integer", act("request_refund", `{"amount":119,"currency":"CAD"}`), "large-refund", record.RiskHigh, "team_lead"},
		{"amount as float", act("request_refund", `{"amount":119.00}`), "large-refund", record.RiskHigh, "team_lead"},
		{"amount with exponent", act("request_refund", `{"amount":1.19e2}`), "large-refund", record.RiskHigh, "team_lead"},
		{"small float", act("request_refund", `{"amount":9.95}`), "small-refund", record.RiskLow, ""},
		{"boundary is not large", act("request_refund", `{"amount":50}`), "small-refund", record.RiskLow, ""},
		{"just above boundary", act("request_refund", `{"amount":50.01}`), "large-refund", record.RiskHigh, "team_lead"},
		{"reship", act("reship_item", `{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`), "reship", record.RiskMedium, "team_lead"},
		{"free label", act("create_return_label", `{"free_shipping":true}`), "free-label", record.RiskLow, ""},
		{"paid label falls through", act("create_return_label", `{"free_shipping":false}`), "everything-else", record.RiskHigh, "manager"},
		{"unknown action", act("delete_database", `{}`), "everything-else", record.RiskHigh, "manager"},
		{"no args", act("delete_database", ``), "everything-else", record.RiskHigh, "manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Evaluate(t.Context(), Input{Action: tt.action})
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			role := ""
			if out.Approval != nil {
				role = out.Approval.Role
			}
			if out.Rule != tt.rule || out.Risk != tt.risk || role != tt.role {
				t.Errorf("got rule %q risk %q role %q; want %q %q %q", out.Rule, out.Risk, role, tt.rule, tt.risk, tt.role)
			}
		})
	}
}

func TestPolicyOutcomeIsACopy(t *testing.T) {
	p := shopPolicy(t)
	in := Input{Action: act("request_refund", `{"amount":119}`)}
	out, err := p.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	out.Approval.Count = 99
	p.Rules()[0].Approval.Count = 98
	again, err := p.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if *again.Approval != *teamLead72h {
		t.Errorf("approval changed through a returned pointer: %+v", again.Approval)
	}
}

func TestPolicyConditionsSeeEverything(t *testing.T) {
	roles := shopRoles(t)
	in := Input{
		Action: act("request_refund", `{"amount":119,"items":[{"sku":"A","qty":2}]}`),
		Index:  1,
		Evidence: []record.Evidence{
			{Source: "orders", Data: json.RawMessage(`{"order_id":"LK-507862","charges":2}`)},
			{Source: "fraud", Data: json.RawMessage(`{"score":0.93}`)},
			{Source: "note"},
		},
		Requester:     record.Person{ID: "agent:resolver", Name: "Resolver"},
		RequesterRole: "agent",
		TaskID:        "T-65273",
	}
	tests := []struct {
		name string
		when string
		want bool
	}{
		{"evidence by source", `evidence.exists(e, e.source == "fraud" && e.data.score > 0.9)`, true},
		{"evidence int compares with double", `evidence.exists(e, e.source == "orders" && e.data.charges > 1.5)`, true},
		{"evidence count", `size(evidence) == 3`, true},
		{"evidence without data is null", `evidence[2].data == null`, true},
		{"requester id", `requester.id.startsWith("agent:")`, true},
		{"requester name", `requester.name == "Resolver"`, true},
		{"requester role", `requester.role == "agent"`, true},
		{"any argument name is allowed", `has(action.args.nme)`, false},
		{"task", `task == "T-65273"`, true},
		{"index", `action.index == 1`, true},
		{"int argument compares with int", `action.args.amount == 119`, true},
		{"int argument compares with double", `action.args.amount > 118.5`, true},
		{"nested arguments", `action.args.items.all(i, i.qty <= 2)`, true},
		{"has on a missing argument", `has(action.args.reason)`, false},
		{"in list", `action.name in ["request_refund", "reship_item"]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New("r1", []Rule{
				{Name: "probe", When: tt.when, Risk: record.RiskHigh},
				{Name: "rest", When: "true", Risk: record.RiskLow},
			}, roles)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			out, err := p.Evaluate(t.Context(), in)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if got := out.Rule == "probe"; got != tt.want {
				t.Errorf("condition %s held = %v, want %v", tt.when, got, tt.want)
			}
		})
	}
}

func TestPolicyFailsClosed(t *testing.T) {
	roles := shopRoles(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		rules []Rule
		in    Input
		ctx   context.Context
		want  string
		is    error
	}{
		{
			name:  "no rule matches",
			rules: []Rule{{Name: "refunds", When: `action.name == "request_refund"`, Risk: record.RiskLow}},
			in:    Input{Action: act("reship_item", `{}`)},
			want:  "no policy rule matched",
			is:    ErrNoRuleMatched,
		},
		{
			name: "evaluation error stops even when a later rule would match",
			rules: []Rule{
				{Name: "needs-amount", When: `action.args.amount > 50`, Risk: record.RiskHigh},
				{Name: "rest", When: "true", Risk: record.RiskLow},
			},
			in:   Input{Action: act("reship_item", `{"sku":"PLANTER"}`)},
			want: `rule "needs-amount" on action reship_item: no such key: amount`,
		},
		{
			name:  "arguments are not an object",
			rules: []Rule{{Name: "rest", When: "true", Risk: record.RiskLow}},
			in:    Input{Action: act("request_refund", `[1,2]`)},
			want:  "arguments must be a JSON object, got array",
		},
		{
			name:  "duplicate argument key",
			rules: []Rule{{Name: "rest", When: "true", Risk: record.RiskLow}},
			in:    Input{Action: act("request_refund", `{"amount":1,"amount":500}`)},
			want:  "duplicate",
		},
		{
			name:  "broken evidence",
			rules: []Rule{{Name: "rest", When: "true", Risk: record.RiskLow}},
			in:    Input{Action: act("request_refund", `{}`), Evidence: []record.Evidence{{Source: "x", Data: json.RawMessage(`{`)}}},
			want:  "decode evidence 0 (x)",
		},
		{
			name:  "cancelled context",
			rules: []Rule{{Name: "rest", When: "true", Risk: record.RiskLow}},
			in:    Input{Action: act("request_refund", `{}`)},
			ctx:   cancelled,
			want:  "context canceled",
			is:    context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New("r1", tt.rules, roles)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			out, err := p.Evaluate(ctx, tt.in)
			if err == nil {
				t.Fatalf("Evaluate = %+v, want an error", out)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			if !reflect.DeepEqual(out, Outcome{}) {
				t.Errorf("outcome on error = %+v, want zero", out)
			}
		})
	}
}

func TestPolicyCostLimit(t *testing.T) {
	// Three nested comprehensions over 300 items: 27 million steps unguarded.
	p, err := New("r1", []Rule{{
		Name: "hostile",
		When: `action.args.items.all(a, action.args.items.all(b, action.args.items.all(c, a + b + c >= 0)))`,
		Risk: record.RiskLow,
	}}, shopRoles(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	items := make([]int, 300)
	args, _ := json.Marshal(map[string]any{"items": items})
	_, err = p.Evaluate(t.Context(), Input{Action: record.Action{Name: "x", Args: args}})
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("err = %v, want the cost limit to stop evaluation", err)
	}
	// The same rule over a few items is fine: the limit is not a ban.
	_, err = p.Evaluate(t.Context(), Input{Action: act("x", `{"items":[1,2,3]}`)})
	if err != nil {
		t.Fatalf("small input: %v", err)
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	roles := shopRoles(t)
	ok := Rule{Name: "ok", When: "true", Risk: record.RiskLow}
	tests := []struct {
		name  string
		rules []Rule
		index int
		field string
		want  string
	}{
		{"empty name", []Rule{{When: "true", Risk: record.RiskLow}}, 0, "name", "must not be empty"},
		{"duplicate name", []Rule{ok, ok}, 1, "name", `duplicate rule name "ok" (also rules[0])`},
		{"undeclared variable", []Rule{ok, {Name: "typo", When: `actoin.name == "x"`, Risk: record.RiskLow}}, 1, "when",
			"ERROR: <input>:1:1: undeclared reference to 'actoin'"},
		{"syntax error", []Rule{{Name: "r", When: `action.name ==`, Risk: record.RiskLow}}, 0, "when", "ERROR: <input>:1:"},
		{"unknown action field", []Rule{ok, {Name: "typo", When: `action.nme == "request_refund"`, Risk: record.RiskLow}}, 1, "when",
			"ERROR: <input>:1:7: undefined field 'nme' (action has name, index, args;"},
		{"unknown requester field", []Rule{{Name: "r", When: `requester.team == "ops"`, Risk: record.RiskLow}}, 0, "when", "undefined field 'team'"},
		{"unknown evidence field", []Rule{{Name: "r", When: `evidence.exists(e, e.sorce == "fraud")`, Risk: record.RiskLow}}, 0, "when", "undefined field 'sorce'"},
		{"empty condition", []Rule{{Name: "r", When: " ", Risk: record.RiskLow}}, 0, "when", "empty condition"},
		{"int condition", []Rule{{Name: "r", When: "1 + 1", Risk: record.RiskLow}}, 0, "when", "type int, want bool"},
		{"dyn condition", []Rule{{Name: "r", When: "action.args.flag", Risk: record.RiskLow}}, 0, "when", "type dyn, want bool"},
		{"string condition", []Rule{{Name: "r", When: "action.name", Risk: record.RiskLow}}, 0, "when", "want bool"},
		{"bad risk", []Rule{{Name: "r", When: "true", Risk: "severe"}}, 0, "risk", `risk "severe": want low, medium or high`},
		{"missing risk", []Rule{{Name: "r", When: "true"}}, 0, "risk", `risk ""`},
		{"unknown role", []Rule{{Name: "r", When: "true", Risk: record.RiskLow, Approval: &record.ApprovalSpec{Role: "owner", Count: 1, Expires: 60}}},
			0, "approval.role", `unknown role "owner" (roles: agent, team_lead, manager)`},
		{"zero count", []Rule{{Name: "r", When: "true", Risk: record.RiskLow, Approval: &record.ApprovalSpec{Role: "manager", Expires: 60}}},
			0, "approval.count", "at least 1 approver"},
		{"no expiry", []Rule{{Name: "r", When: "true", Risk: record.RiskLow, Approval: &record.ApprovalSpec{Role: "manager", Count: 1}}},
			0, "approval.expires", "at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New("r1", tt.rules, roles)
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RuleError", err)
			}
			if re.Index != tt.index || re.Field != tt.field {
				t.Errorf("RuleError at rules[%d].%s, want rules[%d].%s", re.Index, re.Field, tt.index, tt.field)
			}
			if !strings.Contains(re.Err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", re.Err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err spans lines: %q", err)
			}
		})
	}
}

func TestNewPolicyNeedsRevisionAndRules(t *testing.T) {
	tests := []struct {
		name     string
		revision string
		rules    []Rule
		want     string
	}{
		{"no revision", " ", []Rule{{Name: "r", When: "true", Risk: record.RiskLow}}, "revision is empty"},
		{"no rules", "r1", nil, "no rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.revision, tt.rules, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPolicyConcurrentEvaluate(t *testing.T) {
	p := shopPolicy(t)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 50 {
				amount := g*10 + i
				out, err := p.Evaluate(context.Background(), Input{Action: act("request_refund", fmt.Sprintf(`{"amount":%d}`, amount))})
				if err == nil && (out.Rule == "large-refund") != (amount > 50) {
					err = fmt.Errorf("amount %d matched %s", amount, out.Rule)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestPolicyConditionShapes: what a loader checks without evaluating: the
// catch-all rule and the action names a condition compares with.
func TestPolicyConditionShapes(t *testing.T) {
	tests := []struct {
		when     string
		catchAll bool
		actions  []string
	}{
		{`true`, true, nil},
		{`1 == 1`, false, nil},
		{`action.name == "request_refund" && double(action.args.amount) > 50.0`, false, []string{"request_refund"}},
		{`"reship_item" == action.name || action.name != "refund_item"`, false, []string{"reship_item", "refund_item"}},
		{`action.name in ["a", "b", "a"]`, false, []string{"a", "b"}},
		{`action.args.name == "not an action"`, false, nil},
		{`requester.name == "someone"`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			p, err := New("r1", []Rule{{Name: "r", When: tt.when, Risk: record.RiskLow}}, shopRoles(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.CatchAll(0); got != tt.catchAll {
				t.Errorf("CatchAll = %v, want %v", got, tt.catchAll)
			}
			if got := p.NamedActions(0); fmt.Sprint(got) != fmt.Sprint(tt.actions) {
				t.Errorf("NamedActions = %q, want %q", got, tt.actions)
			}
		})
	}
}

// TestPolicyArgsRead: the arguments a condition reads, each with the actions
// the tests of action.name beside it let it be read on; reads a presence
// test guards never fail and are not listed.
func TestPolicyArgsRead(t *testing.T) {
	tests := []struct {
		when string
		want string
	}{
		{`true`, `[]`},
		{`action.name == "request_refund" && double(action.args.amount) > 50.0`, `[{amount [request_refund] []}]`},
		{`double(action.args.amount) > 50.0 && "request_refund" == action.name`, `[{amount [request_refund] []}]`},
		{`action.args["qty"] > 3 || action.args.items.exists(i, i.sku == "x")`, `[{qty [] []} {items [] []}]`},
		{`action.name in ["a", "b"] && action.name == "b" && action.args.x == 1`, `[{x [b] []}]`},
		{`action.name == "a" && action.name == "b" && action.args.x == 1`, `[]`},
		{`action.name != "a" && action.args.x == 1`, `[{x [] [a]}]`},
		{`action.name == "a" ? action.args.x == 1 : action.args.y == 2`, `[{x [a] []} {y [] []}]`},
		{`has(action.args.x) && action.args.x == 1`, `[]`},
		{`"x" in action.args && action.args.x.y == 1`, `[]`},
		{`has(action.args.x) || action.args.y == 1`, `[{y [] []}]`},
		{`evidence.exists(e, e.data.args == 1)`, `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			p, err := New("r1", []Rule{{Name: "r", When: tt.when, Risk: record.RiskLow}}, shopRoles(t))
			if err != nil {
				t.Fatal(err)
			}
			got := "["
			for i, r := range p.ArgsRead(0) {
				if i > 0 {
					got += " "
				}
				got += fmt.Sprintf("{%s %v %v}", r.Name, r.Actions, r.Except)
			}
			if got += "]"; got != tt.want {
				t.Errorf("ArgsRead = %s, want %s", got, tt.want)
			}
		})
	}
}
