package bot_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// outcomeConfig is the example of docs/configuration.md, "Who hears the
// outcome": the doc shows the config these tests run.
func outcomeConfig(t *testing.T) *config.Config {
	t.Helper()
	return docConfig(t, "Who hears the outcome")
}

func newOutcomeHarness(t *testing.T) *dispatchHarness {
	t.Helper()
	cfg := outcomeConfig(t)
	return newDispatchHarnessFor(t, cfg, bot.Outbox{SlackUserOf: cfg.Requesters.SlackUserOf})
}

// submitAs submits the double-charge refund (large-refund: team_lead, self
// approval allowed) as requester, or with a small amount (everything-else: no
// approval).
func (h *dispatchHarness) submitAs(t *testing.T, requester string, small bool) *record.Run {
	t.Helper()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	p.Requester = record.Person{ID: requester}
	p.IdempotencyKey = requester + "-" + t.Name()
	if small {
		p.Actions[0].Args = []byte(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":9.00,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)
	}
	run, err := h.engine.Submit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// outcomeMessages are the messages fake Slack holds that are not the
// approval channel's, as "recipient: first line of the outcome".
func outcomeMessages(fs *fakeslack.Server) []string {
	var out []string
	for _, m := range fs.Messages() {
		if m.Channel == "C0APPROVALS" {
			continue
		}
		to := m.Channel
		if m.User != "" {
			to = "dm " + m.User
		}
		out = append(out, to+": "+m.Text)
	}
	return out
}

func TestTheOutcomeIsSentOnceToTheRequesterAndTheNotified(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		requester string
		end       func(h *dispatchHarness, run *record.Run) error
		outcome   string   // the fallback's first word
		to        []string // who hears it, in order
	}{
		{"approved and done", "agent:resolver", func(h *dispatchHarness, run *record.Run) error {
			if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
				return err
			}
			_, err := h.engine.Resume(ctx, run.ID)
			return err
		}, "Done", []string{"dm U0OWNER001", "C0ONCALL01", "dm U0MGR00001"}},
		{"rejected by a notified manager", "agent:resolver", func(h *dispatchHarness, run *record.Run) error {
			_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictReject, Reason: "not a double charge", Via: "slack"})
			return err
		}, "Rejected", []string{"dm U0OWNER001", "C0ONCALL01"}},
		{"approved by the requester themselves", "U0LEAD0002", func(h *dispatchHarness, run *record.Run) error {
			if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
				return err
			}
			_, err := h.engine.Resume(ctx, run.ID)
			return err
		}, "Done", []string{"C0ONCALL01", "dm U0MGR00001"}},
		{"a Slack user's run expired", "U0LEAD0002", func(h *dispatchHarness, run *record.Run) error {
			h.clock.now = h.clock.now.Add(73 * time.Hour)
			_, err := h.engine.ExpireDue(ctx)
			return err
		}, "Expired", []string{"dm U0LEAD0002", "C0ONCALL01", "dm U0MGR00001"}},
		{"cancelled", "agent:resolver", func(h *dispatchHarness, run *record.Run) error {
			_, err := h.engine.Cancel(ctx, run.ID, record.Person{ID: "U0LEAD0001"}, "duplicate ticket")
			return err
		}, "Cancelled", []string{"dm U0OWNER001", "C0ONCALL01", "dm U0MGR00001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newOutcomeHarness(t)
			run := h.submitAs(t, tt.requester, false)
			if run.Status != record.StatusWaitingApproval {
				t.Fatalf("submitted: %s", run.Status)
			}
			h.deliver(t) // the approval message
			if got := outcomeMessages(h.slack); len(got) != 0 {
				t.Fatalf("told before the outcome: %v", got)
			}
			if err := tt.end(h, run); err != nil {
				t.Fatal(err)
			}
			h.deliver(t)
			got := outcomeMessages(h.slack)
			var to []string
			for _, m := range got {
				who, text, _ := strings.Cut(m, ": ")
				to = append(to, who)
				if !strings.HasPrefix(text, tt.outcome+": request_refund") || !strings.Contains(text, run.ID) {
					t.Errorf("%s was told %q, want %s of run %s", who, text, tt.outcome, run.ID)
				}
			}
			if !slices.Equal(to, tt.to) {
				t.Fatalf("told %v, want %v", got, tt.to)
			}
			approval := h.slack.Messages()[0]
			link := fakeslack.PermalinkOf(approval.Channel, approval.TS)
			for _, m := range h.slack.Messages()[1:] {
				if m.Channel != "C0APPROVALS" && !strings.Contains(m.Blocks, link) {
					t.Errorf("the message to %s does not link the approval message %s: %s", m.Channel, link, m.Blocks)
				}
			}

			// A restart: a second dispatcher over the same store sends nothing again.
			again := &bot.Dispatcher{Engine: h.engine, Slack: bot.NewAPI("xoxb-test", h.slack.URL(), 5*time.Second), Channel: "C0APPROVALS", Clock: h.clock, Render: testRender}
			h.clock.now = h.clock.now.Add(time.Hour)
			if n, err := again.DeliverDue(ctx, 0); err != nil || n != 0 {
				t.Fatalf("after a restart: delivered %d, %v", n, err)
			}
			if n := len(h.slack.Calls("chat.postMessage")); n != 1+len(tt.to) {
				t.Errorf("%d posts, want the approval message and %d outcomes", n, len(tt.to))
			}
		})
	}
}

// A run no person was asked about still has an outcome its requester and
// its rule's recipients hear.
func TestTheOutcomeOfARunWithoutApproval(t *testing.T) {
	h := newOutcomeHarness(t)
	run := h.submitAs(t, "agent:resolver", true)
	if run.Status == record.StatusExecuting {
		var err error
		if run, err = h.engine.Resume(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if run.Status != record.StatusDone {
		t.Fatalf("status %s, want done", run.Status)
	}
	h.deliver(t)
	got := outcomeMessages(h.slack)
	if len(got) != 2 || !strings.HasPrefix(got[0], "dm U0OWNER001: Done") || !strings.HasPrefix(got[1], "C0ONCALL01: Done") {
		t.Fatalf("told %v, want the requester and the on-call channel", got)
	}
	if m := h.slack.Messages()[1]; strings.Contains(m.Blocks, "approval message") {
		t.Errorf("links an approval message there is none of: %s", m.Blocks)
	}
}

// Without a slack: section the hook is not installed: the outcome queues
// nothing, whatever the rules' notify lists say.
func TestNoSlackQueuesNoOutcome(t *testing.T) {
	h := newOutcomeHarness(t)
	ctx := context.Background()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.noSlack.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.noSlack.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictReject, Reason: "no", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	rows, err := h.noSlack.Outbox().List(ctx, storage.OutboxFilter{Kinds: bot.Kinds})
	if err != nil || len(rows) != 0 {
		t.Fatalf("queued %d Slack rows, %v", len(rows), err)
	}
}

// A failed outcome message is retried, and a rewrite of the same run failing
// does not send it twice.
func TestAnOutcomeIsRetriedAlone(t *testing.T) {
	h := newOutcomeHarness(t)
	ctx := context.Background()
	run := h.submitAs(t, "agent:resolver", false)
	h.deliver(t)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictReject, Reason: "no", Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.slack.FailNext("chat.update", 500, "")
	if _, err := h.disp.DeliverDue(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := outcomeMessages(h.slack); len(got) != 2 {
		t.Fatalf("told %v, want the requester and the channel while the rewrite fails", got)
	}
	h.clock.now = h.clock.now.Add(time.Minute)
	h.deliver(t)
	if got := outcomeMessages(h.slack); len(got) != 2 {
		t.Fatalf("after the rewrite's retry: told %v", got)
	}
	if m := h.slack.Messages()[0]; m.Updates == 0 {
		t.Error("the approval message was not rewritten on retry")
	}
}

// The outcome says who decided and why; what people and agents wrote is
// shown inert, so a reason cannot ping a channel or hide a link.
func TestTheOutcomeShowsTheDecisionInert(t *testing.T) {
	h := newOutcomeHarness(t)
	ctx := context.Background()
	run := h.submitAs(t, "agent:resolver", false)
	h.deliver(t)
	reason := "<!channel> see <https://evil.example|the refund>"
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0MGR00001"}, Verdict: record.VerdictReject, Reason: reason, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	var dm *fakeslack.Message
	for _, m := range h.slack.Messages() {
		if m.User == "U0OWNER001" {
			dm = &m
		}
	}
	if dm == nil {
		t.Fatalf("no direct message: %+v", h.slack.Messages())
	}
	var blocks []struct {
		Text struct{ Text string } `json:"text"`
	}
	if err := json.Unmarshal([]byte(dm.Blocks), &blocks); err != nil || len(blocks) != 1 {
		t.Fatalf("blocks %s: %v", dm.Blocks, err)
	}
	text := blocks[0].Text.Text
	for _, want := range []string{"Your request", "*Rejected* by <@U0MGR00001> (manager)", "`&lt;!channel&gt; see &lt;https://evil.example|the refund&gt;`",
		"<" + fakeslack.PermalinkOf("C0APPROVALS", h.slack.Messages()[0].TS) + "|See the approval message>", "Run `" + run.ID + "`"} {
		if !strings.Contains(text, want) {
			t.Errorf("the direct message lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "<!channel>") || strings.Contains(text, "<https://evil") {
		t.Errorf("the reason is markup: %s", text)
	}
}

// The gate keeps every matching rule's recipients, in order, each once; the
// CLI shows them.
func TestTheGateKeepsEveryRulesRecipients(t *testing.T) {
	h := newOutcomeHarness(t)
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	large := p.Actions[0]
	small := large
	small.Args = []byte(`{"order_id":"LK-507862","payment_id":"PAY-507862-1","amount":9.00,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)
	p.Actions = []record.Action{small, large} // everything-else, then large-refund
	run, err := h.engine.Submit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.engine.Get(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"C0ONCALL01", "U0MGR00001"}; v.Gate == nil || !slices.Equal(v.Gate.Notify, want) {
		t.Fatalf("gate %+v, want notify %q", v.Gate, want)
	}
}
