package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/signoff-dev/signoff/fixtures"
)

func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	out := map[string]*jsonschema.Schema{}
	for name, src := range Schemas() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
		if err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		url := "signoff:///" + name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		out[name] = sch
	}
	return out
}

func TestSchemas(t *testing.T) {
	schemas := compileSchemas(t)
	if len(schemas) != 3 || len(Executors(nil, "x")) != 3 {
		t.Fatalf("%d schemas, %d executors; want one of each per action", len(schemas), len(Executors(nil, "x")))
	}
	for name := range Executors(nil, "x") {
		if schemas[name] == nil {
			t.Errorf("executor %s has no schema", name)
		}
	}
	tests := []struct {
		action, args string
		ok           bool
	}{
		{ActionRefund, `{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119.00,"currency":"CAD","reason_code":"RFD-DOUBLE"}`, true},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"CAD","reason_code":"RFD-DEFECT"}`, true},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.955,"currency":"CAD","reason_code":"RFD-DEFECT"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":0,"currency":"CAD","reason_code":"RFD-DEFECT"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":"9.95","currency":"CAD","reason_code":"RFD-DEFECT"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"cad","reason_code":"RFD-DEFECT"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"CAD"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"CAD","reason_code":"RFD-DEFECT","note":"x"}`, false},
		{ActionRefund, `{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":1000001,"currency":"CAD","reason_code":"RFD-DEFECT"}`, false},
		{ActionReship, `{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`, true},
		{ActionReship, `{"order_id":"LK-640436","sku":"PLANTER","quantity":0}`, false},
		{ActionReship, `{"order_id":"LK-640436","sku":"PLANTER","quantity":1.5}`, false},
		{ActionReship, `{"order_id":"LK-640436","sku":"PLANTER"}`, false},
		{ActionReship, `{"order_id":"640436","sku":"PLANTER","quantity":1}`, false},
		{ActionReturnLabel, `{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged","free_shipping":true}`, true},
		{ActionReturnLabel, `{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged","free_shipping":"yes"}`, false},
		{ActionReturnLabel, `{"order_id":"LK-640436","sku":"PLANTER","reason":"because","free_shipping":true}`, false},
		{ActionReturnLabel, `{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged"}`, false},
	}
	for _, tt := range tests {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.args))
		if err != nil {
			t.Fatal(err)
		}
		err = schemas[tt.action].Validate(inst)
		if (err == nil) != tt.ok {
			t.Errorf("%s %s: valid=%v (%v), want %v", tt.action, tt.args, err == nil, err, tt.ok)
		}
	}
}

// The example proposals are what users submit first: every action in them
// must pass its schema.
func TestExampleProposalsMatchTheSchemas(t *testing.T) {
	schemas := compileSchemas(t)
	for _, name := range fixtures.ProposalNames() {
		b, err := fixtures.Proposal(name)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Actions []record.Action `json:"actions"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, a := range p.Actions {
			sch := schemas[a.Name]
			if sch == nil {
				t.Errorf("%s: action %s has no executor", name, a.Name)
				continue
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.Args))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("%s: %s: %v", name, a.Name, err)
			}
		}
	}
}

func TestExecutors(t *testing.T) {
	refund := `{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119,"currency":"CAD","reason_code":"RFD-DOUBLE"}`
	tests := []struct {
		name       string
		action     record.Action
		wantRule   string // of Check and Execute; "" when both succeed
		wantPrefix string
	}{
		{"refund", record.Action{Name: ActionRefund, Args: []byte(refund)}, "", "RF-"},
		{"reship", record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`)}, "", "RS-"},
		{"label", record.Action{Name: ActionReturnLabel, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged","free_shipping":true}`)}, "", "RL-"},
		{"refund of a refunded charge", record.Action{Name: ActionRefund, Args: []byte(`{"order_id":"LK-452190","payment_id":"PAY-452190-1","amount":1,"currency":"CAD","reason_code":"RFD-X"}`)}, "payment-not-captured", ""},
		{"refund above the charge", record.Action{Name: ActionRefund, Args: []byte(`{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":10,"currency":"CAD","reason_code":"RFD-X"}`)}, "exceeds-remaining", ""},
		{"reship of another sku", record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"KETTLE","quantity":1}`)}, "sku-not-on-order", ""},
		{"unknown field", record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1,"express":true}`)}, "invalid-args", ""},
		{"duplicate key", record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1,"quantity":2}`)}, "invalid-args", ""},
		{"missing field", record.Action{Name: ActionReturnLabel, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged"}`)}, "invalid-args", ""},
		{"not JSON", record.Action{Name: ActionRefund, Args: []byte(`{"order_id":`)}, "invalid-args", ""},
		{"wrong type", record.Action{Name: ActionRefund, Args: []byte(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":"119","currency":"CAD","reason_code":"RFD-DOUBLE"}`)}, "invalid-args", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newShop(t)
			ctx := context.Background()
			ex := Executors(s, "signoff")[tt.action.Name]
			err := ex.Check(ctx, tt.action)
			if got := refusedRule(t, err); got != tt.wantRule || (tt.wantRule == "" && err != nil) {
				t.Fatalf("Check: %v (rule %q), want rule %q", err, got, tt.wantRule)
			}
			if n := len(mustChanges(t, s)); n != 0 {
				t.Fatalf("Check changed the shop: %d changes", n)
			}
			if _, found, err := ex.Lookup(ctx, "run-1/0"); found || err != nil {
				t.Fatalf("Lookup before Execute: found %v, err %v", found, err)
			}
			rc, err := ex.Execute(ctx, "run-1/0", tt.action)
			if got := refusedRule(t, err); got != tt.wantRule || (tt.wantRule == "" && err != nil) {
				t.Fatalf("Execute: %v (rule %q), want rule %q", err, got, tt.wantRule)
			}
			got, found, err := ex.Lookup(ctx, "run-1/0")
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantRule != "" {
				if found || len(mustChanges(t, s)) != 0 {
					t.Errorf("a refused action left a trace: found %v, changes %v", found, mustChanges(t, s))
				}
				return
			}
			if !found || got.ID != rc.ID || !strings.HasPrefix(rc.ID, tt.wantPrefix) {
				t.Errorf("Lookup after Execute = %+v, %v; Execute gave %+v", got, found, rc)
			}
			again, err := ex.Execute(ctx, "run-1/0", tt.action)
			if err != nil || again.ID != rc.ID {
				t.Errorf("Execute again with the key: %+v, %v; want %+v", again, err, rc)
			}
			if n := len(mustChanges(t, s)); n != 1 {
				t.Errorf("%d changes after executing twice with one key, want 1", n)
			}
		})
	}
}

func TestExecutorRefusesAnotherAction(t *testing.T) {
	s, _ := newShop(t)
	ex := Executors(s, "signoff")[ActionRefund]
	err := ex.Check(context.Background(), record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`)})
	if rule := refusedRule(t, err); rule != "wrong-action" {
		t.Errorf("refund executor given a reship: %v, want wrong-action", err)
	}
}

// A key the register holds for another kind of change means the two ledgers
// disagree: the executor must say it cannot tell, not "did not happen".
func TestLookupOfAKeyOfAnotherKind(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	exs := Executors(s, "signoff")
	if _, err := exs[ActionReship].Execute(ctx, "run-1/0", record.Action{Name: ActionReship, Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, found, err := exs[ActionRefund].Lookup(ctx, "run-1/0"); err == nil || found {
		t.Errorf("refund Lookup of a reshipment key: found %v, err %v; want an error", found, err)
	}
}
