package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// TestCompositeApproversDocExample: the config of docs/configuration.md,
// "Composite approvers", loads; config check and policy explain say its
// requirement in words; a run under it waits after one devops, a second
// devops is refused naming what is still needed, and show (text and JSON)
// says which place is filled by whom until security completes it.
func TestCompositeApproversDocExample(t *testing.T) {
	t.Parallel()
	blocks := blocksOf(docSection(t, "docs/configuration.md", "Composite approvers"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("%d yaml blocks, want 1", len(blocks))
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "signoff.yaml")
	if err := os.WriteFile(cfg, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	const sentence = "a director, or one devops and one security (different people)"
	if out := must(t, dir, 0, "--config", cfg, "config", "check"); !strings.Contains(out, "approval: "+sentence+", within 24h") {
		t.Errorf("config check does not say the requirement:\n%s", out)
	}
	prop := fixture("refund-double-charge.json")
	if out := must(t, dir, 0, "--config", cfg, "policy", "explain", prop); !strings.Contains(out, "waits for approval: "+sentence) {
		t.Errorf("policy explain does not say the requirement:\n%s", out)
	}
	id := runIDOf(t, must(t, dir, exitWaiting, "--config", cfg, "submit", prop))
	must(t, dir, exitWaiting, "--config", cfg, "approve", id, "--as", "U0DEV00001")
	if code, out, errs := signoff(t, dir, "--config", cfg, "approve", id, "--as", "U0DEV00002"); code == 0 || !strings.Contains(out+errs, "still needed: a director, or one security") {
		t.Errorf("a second devops was not refused naming what is still needed (exit %d):\n%s%s", code, out, errs)
	}
	var v workflow.RunView
	if err := json.Unmarshal([]byte(must(t, dir, exitWaiting, "--config", cfg, "show", id, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if p := v.Progress; p == nil || p.Met || len(p.Leaves) != 3 || len(p.Leaves[1].By) != 1 || p.Leaves[1].By[0] != "U0DEV00001" {
		t.Fatalf("progress %+v", v.Progress)
	}
	if out := must(t, dir, exitWaiting, "--config", cfg, "show", id); !strings.Contains(out, "devops: U0DEV00001") || !strings.Contains(out, "security: waiting") {
		t.Errorf("show does not say which places are filled:\n%s", out)
	}
	must(t, dir, exitDone, "--config", cfg, "approve", id, "--as", "U0SEC00001")
}
