package bot

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// maxSummaryText is the budget of the approval message's text however long
// its run's history: 20 actions shown whole while it waits for a decision,
// and the status (decisions, outcome) of at most one section.
const maxSummaryText = 40000

// worstCase is a run with more of everything than the message shows: many
// actions with long arguments, decisions and edits with long reasons,
// resolutions, outcomes with long errors, evidence. waiting keeps it
// waiting for the last of 60 approvals, of a step-up rule (one more line);
// otherwise it needs attention.
func worstCase(waiting bool) *workflow.RunView {
	v := manyActions(withArgs(stepUp(refundView()), decoyArgs()), 40)
	long := strings.Repeat("a reason <!channel> *bold* that goes on ", 40)
	for i := range 50 {
		v.Evidence = append(v.Evidence, record.Evidence{Source: fmt.Sprintf("source_%d", i), Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"text":%q}`, i, long))})
	}
	at := ts("2026-11-30T10:00:00Z")
	for i := range 30 {
		d := workflow.DecisionView{RequestID: gReqID, By: fmt.Sprintf("U0LEAD%04d", i), Role: "team_lead", Decision: record.VerdictApprove, Reason: long, Via: "slack", At: at.Add(time.Duration(i) * time.Minute)}
		if i%3 == 0 {
			d.Edited = json.RawMessage(`{"amount":100}`)
		}
		v.Decisions = append(v.Decisions, d)
	}
	v.Requests[0].Count = 60
	v.Gate.Approval.Count = 60
	if waiting {
		return v
	}
	v.Status, v.Deadline = record.StatusNeedsAttention, nil
	v.Reason = long
	v.Requests[0].Status = record.RequestApproved
	for i := range 40 {
		op := workflow.OperationView{Key: workflow.OperationKey(v.ID, i), Action: "request_refund", Status: record.OpCommitted, Attempts: 1,
			Receipt: json.RawMessage(fmt.Sprintf(`{"id":"RF-%04d"}`, i))}
		if i%2 == 1 {
			op.Status, op.Error = record.OpUnknown, long
		}
		v.Operations = append(v.Operations, op)
	}
	for i := range 10 {
		v.Resolutions = append(v.Resolutions, record.ResolutionRecord{Key: workflow.OperationKey(v.ID, 2*i+1), By: "U0MGR00001", Reason: long, At: at})
	}
	return v
}

// The approval message stays a summary within a fixed budget however many
// decisions, edits, actions, resolutions and outcomes its run has: the
// latest decisions and the first outcomes are shown, and the rest counted
// with where to find them.
func TestTheSummaryStaysBounded(t *testing.T) {
	rc := goldenContext(t)
	for name, v := range map[string]*workflow.RunView{"waiting": worstCase(true), "needs attention": worstCase(false)} {
		t.Run(name, func(t *testing.T) {
			blocks := RenderRun(v, rc)
			checkLimits(t, blocks)
			if n := messageText(t, blocks); n > maxSummaryText {
				t.Errorf("%d characters of text, budget %d", n, maxSummaryText)
			}
			status := sectionText(t, blocks[1])
			if n := strings.Count(status, "U0LEAD"); n != maxDecisionLines {
				t.Errorf("the status names %d deciders, want the latest %d:\n%s", n, maxDecisionLines, status)
			}
			if !strings.Contains(status, "U0LEAD0029") || strings.Contains(status, "U0LEAD0024") {
				t.Errorf("the status should show the latest decisions:\n%s", status)
			}
			if !strings.Contains(status, "…and 25 earlier decisions in the thread") {
				t.Errorf("the status does not count the earlier decisions:\n%s", status)
			}
			if v.Status == record.StatusWaitingApproval {
				return
			}
			if len(blocks) > 3+maxDecidedActions+3 {
				t.Errorf("%d blocks once decided", len(blocks))
			}
			outcome := sectionText(t, blocks[2])
			for _, want := range []string{"…and 32 more actions in the thread", "…and 7 earlier resolutions in the thread"} {
				if !strings.Contains(outcome, want) {
					t.Errorf("the outcome does not say %q:\n%s", want, outcome)
				}
			}
		})
	}
}

// TestWorstCaseGolden keeps the bounded worst case as a golden, so that
// the Block Kit checks over the goldens see it.
func TestWorstCaseGolden(t *testing.T) {
	rc := goldenContext(t)
	for name, v := range map[string]*workflow.RunView{"worst_case_waiting": worstCase(true), "worst_case_needs_attention": worstCase(false)} {
		blocks := RenderRun(v, rc)
		golden(t, filepath.Join("render", name+".json"), marshalPretty(t, map[string]any{"text": FallbackText(v), "blocks": blocks}))
	}
}

// messageText is the characters of text in blocks, as Slack counts them.
func messageText(t testing.TB, blocks []slack.Block) int {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var all any
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				n += slackLen(s)
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(all)
	return n
}

func sectionText(t testing.TB, b slack.Block) string {
	t.Helper()
	s, ok := b.(*slack.SectionBlock)
	if !ok || s.Text == nil {
		t.Fatalf("block %T is not a section with text", b)
	}
	return s.Text.Text
}
