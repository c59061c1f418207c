package bot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// The run of a gated call through the MCP gateway, as docs/mcp.md's
// gateway config makes it: the upstream files, its tool write_file, the
// arguments as the agent sent them (hostile: a mention, formatting, a
// link), the rule everything-else.
const (
	gMCPRunID = "run_01a22a0a6c600005a11ce001"
	gMCPReqID = "req_01a22a0a6c610006a11ce002"
	gMCPFP    = "3f0a9c1e5b7d2a4c6e8f0a1b3c5d7e9f1a2b3c4d5e6f708192a3b4c5d6e7f809"
	gMCPRev   = "2026-12-01.1"
)

func mcpCallView() *workflow.RunView {
	deadline := tp("2026-11-30T10:00:00Z")
	return &workflow.RunView{
		ID: gMCPRunID, Workflow: "proposal", TaskID: "mcp:5d1f0c3b8a7e6d2f", Status: record.StatusWaitingApproval,
		Requester: record.Person{ID: "agent:coder"}, Summary: "MCP call files.write_file", Fingerprint: gMCPFP,
		Actions: []record.Action{{Name: "mcp:files.write_file",
			Args: json.RawMessage(`{"content":"<!channel> *all clear*: deploy <https://example.com|now>","path":"/srv/data/release-notes.md"}`)}},
		Checks: []record.Check{{Action: 0, Name: "mcp:files.write_file", OK: true, Attempts: 1}},
		Gate: &record.Gate{Rule: "everything-else", Risk: record.RiskHigh, PolicyRevision: gMCPRev,
			Approval:    &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: 3600},
			Fingerprint: gMCPFP, RequestID: gMCPReqID, Deadline: deadline},
		Requests: []workflow.RequestView{{ID: gMCPReqID, Status: record.RequestPending, Fingerprint: gMCPFP, Rule: "everything-else",
			PolicyRevision: gMCPRev, Risk: record.RiskHigh, Role: "team_lead", Count: 1, Deadline: *deadline}},
		Decisions: []workflow.DecisionView{}, Operations: []workflow.OperationView{},
		Deadline: deadline, CreatedAt: ts(gCreated), UpdatedAt: ts(gCreated),
	}
}

// mcpCallContext is the golden context with the roles of docs/mcp.md's
// gateway config, five minutes after the call.
func mcpCallContext(t testing.TB) RenderContext {
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:coder"}},
		{Name: "team_lead", Members: []string{leadGrace}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := goldenContext(t)
	rc.Roles, rc.Now = roles, ts("2026-11-30T09:05:00Z")
	return rc
}

// TestMCPCallMessageInTheDocs: what docs/mcp.md shows an approver sees of a
// gated MCP call is the message signoff posts for it (testdata/render/
// waiting_mcp_call.json), as `signoff demo` previews a message in a
// terminal; the agent's mention, formatting and link are shown inert.
func TestMCPCallMessageInTheDocs(t *testing.T) {
	v := mcpCallView()
	preview := Preview(RenderRun(v, mcpCallContext(t)))
	golden(t, filepath.Join("preview", "waiting_mcp_call.txt"), []byte(preview))
	for _, live := range []string{"<!channel>", "<https://example.com|now>"} {
		if strings.Contains(preview, live) {
			t.Errorf("the message holds %q as the agent sent it, live:\n%s", live, preview)
		}
	}
	b, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### What an approver sees of a call\n")
	_, block, ok2 := strings.Cut(sec, "```text\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/mcp.md, "What an approver sees of a call", has no text block`)
	}
	if block != preview {
		t.Errorf("docs/mcp.md shows another message than signoff posts; the message:\n%s", preview)
	}
}
