package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/signoff-dev/signoff/record"
)

// TestMCPVariables: a rule may name an upstream's tool by mcp.upstream and
// mcp.tool, and read the annotations its server claims; a tool that lies
// about being read-only is still caught by a rule that never reads the
// claim.
func TestMCPVariables(t *testing.T) {
	roles, err := NewRoles([]Role{{Name: "team_lead", Members: []string{"U0LEAD"}}})
	if err != nil {
		t.Fatal(err)
	}
	gated := &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600}
	twice := &record.ApprovalSpec{Role: "team_lead", Count: 2, Expires: 3600}
	p, err := New("r1", []Rule{
		{Name: "notes-reads", When: `mcp.upstream == "notes" && mcp.tool == "read_note"`, Risk: "low"},
		{Name: "claimed-destructive", When: `"destructiveHint" in mcp.untrusted_annotations && mcp.untrusted_annotations.destructiveHint == true`,
			Risk: "high", Approval: twice},
		{Name: "everything-else", When: "true", Risk: "high", Approval: gated},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(s string) []record.Evidence {
		return []record.Evidence{{Source: MCPAnnotationsSource, Data: json.RawMessage(s)}}
	}
	for _, c := range []struct {
		name     string
		action   string
		evidence []record.Evidence
		want     string
	}{
		{"a read named by upstream and tool", "mcp:notes.read_note", nil, "notes-reads"},
		{"the same tool of another upstream", "mcp:tickets.read_note", nil, "everything-else"},
		{"a write that claims to be read-only", "mcp:notes.write_note", claims(`{"readOnlyHint":true}`), "everything-else"},
		{"a tool that claims to be destructive", "mcp:notes.drop", claims(`{"readOnlyHint":true,"destructiveHint":true}`), "claimed-destructive"},
		{"claims on an action of no upstream", "deploy", claims(`{"destructiveHint":true}`), "everything-else"},
		{"claims that are not an object", "mcp:notes.drop", claims(`["destructiveHint"]`), "everything-else"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, canonical := range []bool{false, true} {
				out, err := p.Evaluate(context.Background(), Input{Action: record.Action{Name: c.action, Args: json.RawMessage(`{}`)},
					Evidence: c.evidence, EvidenceCanonical: canonical})
				if err != nil {
					t.Fatal(err)
				}
				if out.Rule != c.want {
					t.Fatalf("evidence canonical %v: rule %s, want %s", canonical, out.Rule, c.want)
				}
			}
		})
	}
}
