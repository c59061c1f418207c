package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestCanonicalEvidenceDecidesAlike: evidence the engine stored (canonical,
// decoded only when a rule reads it) gives every rule the same answer as
// evidence decoded first, and evidence a rule reads but cannot decode fails
// the evaluation either way.
func TestCanonicalEvidenceDecidesAlike(t *testing.T) {
	roles := shopRoles(t)
	gated := &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600}
	p, err := New("r1", []Rule{
		{Name: "big-payment", When: `evidence.exists(e, e.source == "get_payments" && e.data.payments.exists(p, p.amount > 500))`, Risk: "high", Approval: gated},
		{Name: "many-sources", When: `size(evidence) > 2`, Risk: "medium", Approval: gated},
		{Name: "rest", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	payments := func(amounts string) record.Evidence {
		return record.Evidence{Source: "get_payments", Data: json.RawMessage(`{"payments":[` + amounts + `]}`)}
	}
	note := record.Evidence{Source: "note", Data: json.RawMessage(`"hello"`)}
	for _, c := range []struct {
		name     string
		evidence []record.Evidence
		want     string
	}{
		{"a payment over the limit", []record.Evidence{payments(`{"amount":120},{"amount":900}`)}, "big-payment"},
		{"payments under it", []record.Evidence{payments(`{"amount":120}`)}, "rest"},
		{"three sources", []record.Evidence{note, note, payments(`{"amount":1}`)}, "many-sources"},
		{"no evidence", nil, "rest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, canonical := range []bool{false, true} {
				out, err := p.Evaluate(context.Background(), Input{Action: act("request_refund", `{}`), Evidence: c.evidence, EvidenceCanonical: canonical})
				if err != nil {
					t.Fatalf("evidence canonical %v: %v", canonical, err)
				}
				if out.Rule != c.want {
					t.Errorf("evidence canonical %v: rule %s, want %s", canonical, out.Rule, c.want)
				}
			}
		})
	}
	broken := []record.Evidence{{Source: "get_payments", Data: json.RawMessage(`{"payments":`)}}
	for _, canonical := range []bool{false, true} {
		out, err := p.Evaluate(context.Background(), Input{Action: act("request_refund", `{}`), Evidence: broken, EvidenceCanonical: canonical})
		if err == nil || !strings.Contains(err.Error(), "decode evidence 0 (get_payments)") {
			t.Errorf("evidence canonical %v: broken evidence a rule reads gave %+v, %v; want it to fail", canonical, out, err)
		}
	}
}
