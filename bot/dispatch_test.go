package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// outboxClock is a settable clock for the dispatcher's retry times.
type outboxClock struct{ now time.Time }

func (c *outboxClock) Now() time.Time { return c.now }

func (c *outboxClock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return ctx.Err()
}

// dispatchHarness is an engine with the Slack outbox hook on a real SQLite file,
// the practice shop, and a dispatcher pointed at a fake Slack on loopback.
type dispatchHarness struct {
	engine *workflow.Engine
	// noSlack is an engine on the same store without the Slack outbox hook: a
	// process whose config had no slack section.
	noSlack *workflow.Engine
	store   storage.Store
	shop    *demo.Shop
	slack   *fakeslack.Server
	disp    *bot.Dispatcher
	clock   *outboxClock
}

func newDispatchHarness(t *testing.T) *dispatchHarness {
	t.Helper()
	return newDispatchHarnessFor(t, config.Default(), bot.Outbox{})
}

// newDispatchHarnessFor is the harness with cfg's roles and policy and hook
// as the Slack outbox hook.
func newDispatchHarnessFor(t *testing.T, cfg *config.Config, hook bot.Outbox) *dispatchHarness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	shopDB, err := sqlite.OpenDB(filepath.Join(dir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shopDB.Close() })
	shop, err := demo.OpenShop(ctx, shopDB, nil)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]*workflow.ActionSpec{}
	for name, exec := range demo.Executors(shop, "signoff") {
		spec, err := workflow.NewActionSpec(name, demo.Schemas()[name], exec, nil)
		if err != nil {
			t.Fatal(err)
		}
		actions[name] = spec
	}
	clock := &outboxClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	e, err := workflow.New(workflow.Config{Store: store, Policy: cfg.Policy, Roles: cfg.Roles, Actions: actions, Clock: clock, Hooks: []workflow.Hook{hook}})
	if err != nil {
		t.Fatal(err)
	}
	noSlack, err := workflow.New(workflow.Config{Store: store, Policy: cfg.Policy, Roles: cfg.Roles, Actions: actions, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	h := &dispatchHarness{engine: e, noSlack: noSlack, store: store, shop: shop, slack: fs, clock: clock}
	h.disp = &bot.Dispatcher{
		Engine: e, Slack: bot.NewAPI("xoxb-test", fs.URL(), 5*time.Second), Channel: "C0APPROVALS",
		Clock: clock, Render: testRender,
	}
	return h
}

// testRender is a plain rendering: the run's status and, while it waits, a button.
func testRender(v *workflow.RunView, r workflow.RequestView) ([]slack.Block, string) {
	text := "run " + v.ID + " " + string(v.Status)
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", text, false, false), nil, nil)}
	if v.Status == record.StatusWaitingApproval {
		blocks = append(blocks, slack.NewActionBlock("decide", slack.NewButtonBlockElement("signoff_approve", r.ID, slack.NewTextBlockObject("plain_text", "Approve", false, false))))
	}
	return blocks, text
}

func (h *dispatchHarness) submitRefund(t *testing.T) *record.Run {
	t.Helper()
	return h.submitWith(t, h.engine, "")
}

// submitWith submits the double-charge refund through e, under its own
// idempotency key when key is set.
func (h *dispatchHarness) submitWith(t *testing.T, e *workflow.Engine, key string) *record.Run {
	t.Helper()
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		p.IdempotencyKey = key
	}
	run, err := e.Submit(context.Background(), p)
	if err != nil || run.Status != record.StatusWaitingApproval {
		t.Fatalf("submit: %v %v", run, err)
	}
	return run
}

func (h *dispatchHarness) deliver(t *testing.T) int {
	t.Helper()
	n, err := h.disp.DeliverDue(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestApprovalMessageIsPostedThenRewritten(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	if n := h.deliver(t); n != 1 {
		t.Fatalf("delivered %d, want the post", n)
	}
	msgs := h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Channel != "C0APPROVALS" || !strings.Contains(msgs[0].Text, run.ID) || !strings.Contains(msgs[0].Blocks, "signoff_approve") {
		t.Fatalf("messages %+v", msgs)
	}
	v, err := h.engine.Get(context.Background(), run.ID)
	if err != nil || v.Requests[0].MessageTS != msgs[0].TS || v.Requests[0].Channel != "C0APPROVALS" {
		t.Fatalf("request does not record the message: %+v %v", v.Requests, err)
	}
	if n := h.deliver(t); n != 0 {
		t.Fatalf("delivered %d again", n)
	}

	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	msgs = h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates == 0 || !strings.Contains(msgs[0].Text, "done") || strings.Contains(msgs[0].Blocks, "signoff_approve") {
		t.Fatalf("after the decision: %+v", msgs)
	}
	if posts := h.slack.Calls("chat.postMessage"); len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
}

func TestSlackOutageDelaysButLosesNothing(t *testing.T) {
	h := newDispatchHarness(t)
	h.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "7")
	h.slack.FailNext("chat.postMessage", http.StatusInternalServerError, "")
	run := h.submitRefund(t)

	if n := h.deliver(t); n != 0 {
		t.Fatalf("delivered %d through a 429", n)
	}
	h.clock.now = h.clock.now.Add(6 * time.Second)
	if n := h.deliver(t); n != 0 {
		t.Fatal("retried before Retry-After")
	}
	h.clock.now = h.clock.now.Add(2 * time.Second)
	if n := h.deliver(t); n != 0 {
		t.Fatal("delivered through a 500")
	}
	// The decision does not wait for Slack.
	if _, err := h.engine.Decide(context.Background(), workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(5 * time.Second)
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 1 {
		t.Fatalf("messages %+v", msgs)
	}
	if strings.Contains(msgs[0].Blocks, "signoff_approve") || !strings.Contains(msgs[0].Text, "executing") {
		t.Fatalf("the late message does not show the decision: %+v", msgs[0])
	}
	if calls := h.slack.Calls("chat.postMessage"); len(calls) != 3 {
		t.Fatalf("%d post attempts, want 429, 500, success", len(calls))
	}
}

func TestOutboxRowsCommitWithTheTransition(t *testing.T) {
	h := newDispatchHarness(t)
	body, _ := fixtures.Proposal("small-refund") // runs without approval: nothing to post
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Submit(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	run := h.submitRefund(t)
	var rows []*record.OutboxMessage
	err = h.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		rows, err = tx.DueOutbox(ctx, h.clock.now.Add(time.Hour), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Kind != bot.KindPost || rows[0].RunID != run.ID {
		t.Fatalf("outbox %+v", rows)
	}
	var payload bot.OutboxPayload
	if err := json.Unmarshal(rows[0].Payload, &payload); err != nil || payload.RequestID == "" {
		t.Fatalf("payload %s %v", rows[0].Payload, err)
	}
}

// TestPostRetriedThroughRateLimitAndServerErrorThenRewritten: Slack answers 429,
// then 500, then success; the message arrives, and the click rewrites it.
func TestPostRetriedThroughRateLimitAndServerErrorThenRewritten(t *testing.T) {
	h := newDispatchHarness(t)
	h.slack.FailNext("chat.postMessage", http.StatusTooManyRequests, "3")
	h.slack.FailNext("chat.postMessage", http.StatusInternalServerError, "")
	run := h.submitRefund(t)
	h.deliver(t) // 429
	h.clock.now = h.clock.now.Add(3 * time.Second)
	h.deliver(t) // 500
	h.clock.now = h.clock.now.Add(time.Minute)
	if n := h.deliver(t); n != 1 {
		t.Fatalf("delivered %d after the outage, want the post", n)
	}
	msgs := h.slack.Messages()
	if len(msgs) != 1 || !strings.Contains(msgs[0].Blocks, "signoff_approve") {
		t.Fatalf("messages %+v", msgs)
	}
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0002"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.slack.FailNext("chat.update", http.StatusServiceUnavailable, "")
	h.deliver(t) // 503 on the rewrite
	h.clock.now = h.clock.now.Add(time.Minute)
	h.deliver(t)
	msgs = h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates != 1 || strings.Contains(msgs[0].Blocks, "signoff_approve") || !strings.Contains(msgs[0].Text, "executing") {
		t.Fatalf("after the click: %+v", msgs)
	}
	if got := len(h.slack.Calls("chat.postMessage")); got != 3 {
		t.Fatalf("%d post attempts, want 3", got)
	}
}

// TestSweeperRewritesAnExpiredRequest: when the deadline passes, the sweep ends
// the run and the message stops offering buttons and says it expired.
func TestSweeperRewritesAnExpiredRequest(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	h.deliver(t)
	h.clock.now = h.clock.now.Add(72*time.Hour + time.Second)
	if n, err := h.engine.ExpireDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("expired %d, %v", n, err)
	}
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates != 1 || !strings.Contains(msgs[0].Text, "expired") || strings.Contains(msgs[0].Blocks, "signoff_approve") {
		t.Fatalf("after the deadline: %+v", msgs)
	}
	if v, _ := h.engine.Get(context.Background(), run.ID); v.Status != record.StatusExpired {
		t.Fatalf("run %s", v.Status)
	}
}

// TestEditThatLowersTheRiskStillRewritesTheMessage: after an edit that needs no
// approval any more, the posted message loses its buttons and shows the outcome.
func TestEditThatLowersTheRiskStillRewritesTheMessage(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	h.deliver(t)
	ctx := context.Background()
	edit := json.RawMessage(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":40,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)
	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack", Edit: edit})
	if err != nil || got.Status != record.StatusExecuting {
		t.Fatalf("edit: %v %v", got, err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.disp.Render = bot.NewRenderer(h.engine, h.engine.Roles(), nil, "", "", h.clock)
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates == 0 || strings.Contains(msgs[0].Blocks, "signoff_approve") || strings.Contains(msgs[0].Blocks, "replaced") {
		t.Fatalf("the message was not rewritten with the outcome: %+v", msgs)
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil || v.Status != record.StatusDone {
		t.Fatalf("run %v %v", v, err)
	}
	var rc record.Receipt
	if err := json.Unmarshal(v.Operations[0].Receipt, &rc); err != nil || !strings.Contains(msgs[0].Blocks, rc.ID) {
		t.Fatalf("the message does not show the receipt %q: %s", rc.ID, msgs[0].Blocks)
	}
}

// TestEditApprovedAtOnceRewritesTheMessage: an edit whose editor's approval
// settles the new request at once asks nobody anything, so no new message is
// posted, and the posted one shows the run with the edited arguments and its
// outcome, not a pointer to a newer message that never comes.
func TestEditApprovedAtOnceRewritesTheMessage(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	h.deliver(t)
	ctx := context.Background()
	edit := json.RawMessage(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":60,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)
	got, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack", Edit: edit})
	if err != nil || got.Status != record.StatusExecuting {
		t.Fatalf("edit: %v %v", got, err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.disp.Render = bot.NewRenderer(h.engine, h.engine.Roles(), nil, "", "", h.clock)
	h.deliver(t)
	msgs := h.slack.Messages()
	if len(msgs) != 1 || msgs[0].Updates == 0 || strings.Contains(msgs[0].Blocks, "replaced") || !strings.Contains(msgs[0].Blocks, "`60`") {
		t.Fatalf("the message does not show the edited run: %+v", msgs)
	}
	if strings.Contains(msgs[0].Blocks, "signoff_approve") {
		t.Fatalf("the message of a run past its approval still has buttons: %s", msgs[0].Blocks)
	}
}

// TestNotInChannelIsRetriedSoon: a bot nobody invited yet cannot post; once
// someone types /invite @signoff, the message arrives within two minutes,
// not an hour later.
func TestNotInChannelIsRetriedSoon(t *testing.T) {
	h := newDispatchHarness(t)
	h.slack.SetMember("C0APPROVALS", false)
	h.submitRefund(t)
	for range 6 { // six failed tries, each waiting at most two minutes
		if n := h.deliver(t); n != 0 {
			t.Fatal("posted to a channel the bot is not in")
		}
		h.clock.now = h.clock.now.Add(2 * time.Minute)
	}
	h.slack.SetMember("C0APPROVALS", true) // /invite @signoff
	h.clock.now = h.clock.now.Add(2 * time.Minute)
	if n := h.deliver(t); n != 1 || len(h.slack.Messages()) != 1 {
		t.Fatalf("delivered %d within two minutes of the invitation", n)
	}
}

// TestCheckSetup: serve asks Slack at start whether the token works and the
// bot is in the channel, and says what to do when not.
func TestCheckSetup(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	api := bot.NewAPI("xoxb-test", fs.URL(), 5*time.Second)
	ctx := context.Background()
	if id, err := api.CheckSetup(ctx, "C0APPROVALS"); err != nil || id.BotUser != fakeslack.Bot || id.TeamID != fakeslack.Team {
		t.Fatalf("a working setup: %+v %v", id, err)
	}
	for _, tc := range []struct {
		name, want string
		prepare    func()
		refuse     bool // nothing can be posted until a person fixes it
	}{
		{"not in the channel", "/invite @signoff", func() { fs.SetMember("C0APPROVALS", false) }, false},
		{"bad token", "SLACK_BOT_TOKEN", func() { fs.ErrorNext("auth.test", "invalid_auth") }, true},
		{"unknown channel", "check slack.channel", func() { fs.ErrorNext("conversations.info", "channel_not_found") }, true},
		{"no scope", "channels:read", func() { fs.ErrorNext("conversations.info", "missing_scope") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.SetMember("C0APPROVALS", true)
			tc.prepare()
			_, err := api.CheckSetup(ctx, "C0APPROVALS")
			var se *bot.SetupError
			if !errors.As(err, &se) || !strings.Contains(se.Fix, tc.want) || se.Refuse != tc.refuse {
				t.Fatalf("got %v (refuse %v), want a setup error saying %q (refuse %v)", err, se != nil && se.Refuse, tc.want, tc.refuse)
			}
		})
	}
}

// TestOneRewritePerRendering: an approval that runs to the end queues a
// rewrite per transition (decided, executed, finished); Slack gets one
// chat.update showing the end, whether the rows are due in one pass or are
// delivered one per pass.
func TestOneRewritePerRendering(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int // rows per pass; 0: all due rows in one pass
		passes int
	}{
		{"all rows in one pass", 0, 1},
		{"one row per pass", 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDispatchHarness(t)
			run := h.submitRefund(t)
			h.deliver(t)
			ctx := context.Background()
			if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.engine.Resume(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			for range tc.passes {
				if _, err := h.disp.DeliverDue(ctx, tc.limit); err != nil {
					t.Fatal(err)
				}
			}
			if n := h.deliver(t); n != 0 {
				t.Fatalf("%d rows still due after %d passes", n, tc.passes)
			}
			msgs := h.slack.Messages()
			if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "done") {
				t.Fatalf("messages %+v", msgs)
			}
			if got := len(h.slack.Calls("chat.update")); got != 1 {
				t.Fatalf("%d chat.update calls, want 1 (the message went from waiting to done)", got)
			}
		})
	}
}

// TestChangedRenderingIsRewrittenAgain: skipping repeats must not skip a change.
func TestChangedRenderingIsRewrittenAgain(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	h.deliver(t)
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if m := h.slack.Messages()[0]; m.Updates != 1 || !strings.Contains(m.Text, "executing") {
		t.Fatalf("after the decision: %+v", m)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	h.deliver(t)
	if m := h.slack.Messages()[0]; m.Updates != 2 || !strings.Contains(m.Text, "done") {
		t.Fatalf("after the execution: %+v", m)
	}
}

// TestWaitingRunsWithoutAMessageArePosted: a run that waited while no process
// queued its message (the config had no slack section yet) gets its message
// once; one whose post is queued or delivered gets no second one, however
// many sweeps or replicas look.
func TestWaitingRunsWithoutAMessageArePosted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prepare   func(t *testing.T, h *dispatchHarness)
		replicas  int
		wantQueue int
	}{
		{"waited before slack was configured", func(t *testing.T, h *dispatchHarness) {
			h.submitWith(t, h.noSlack, "before-slack")
		}, 1, 1},
		{"post already queued", func(t *testing.T, h *dispatchHarness) {
			h.submitWith(t, h.engine, "with-slack")
		}, 1, 0},
		{"post already delivered", func(t *testing.T, h *dispatchHarness) {
			h.submitWith(t, h.engine, "with-slack")
			h.deliver(t)
		}, 1, 0},
		{"post in retry after a 500", func(t *testing.T, h *dispatchHarness) {
			h.slack.FailNext("chat.postMessage", http.StatusInternalServerError, "")
			h.submitWith(t, h.engine, "with-slack")
			h.deliver(t)
		}, 1, 0},
		{"three replicas sweep the same store", func(t *testing.T, h *dispatchHarness) {
			h.submitWith(t, h.noSlack, "before-slack")
		}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDispatchHarness(t)
			tc.prepare(t, h)
			ctx := context.Background()
			disps := []*bot.Dispatcher{h.disp}
			for range tc.replicas - 1 {
				disps = append(disps, &bot.Dispatcher{Engine: h.engine, Slack: h.disp.Slack, Channel: h.disp.Channel, Clock: h.clock, Render: testRender})
			}
			errs := make(chan error, len(disps))
			counts := make(chan int, len(disps))
			for _, d := range disps {
				go func() {
					n, err := d.QueueUnposted(ctx)
					counts <- n
					errs <- err
				}()
			}
			queued := 0
			for range disps {
				queued += <-counts
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if queued != tc.wantQueue {
				t.Fatalf("queued %d posts, want %d", queued, tc.wantQueue)
			}
			// Later sweeps and deliveries add nothing.
			for range 3 {
				h.clock.now = h.clock.now.Add(time.Hour)
				for _, d := range disps {
					if n, err := d.QueueUnposted(ctx); err != nil || n != 0 {
						t.Fatalf("a later sweep queued %d (%v)", n, err)
					}
					if _, err := d.DeliverDue(ctx, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			if posts := h.slack.Messages(); len(posts) != 1 || !strings.Contains(posts[0].Blocks, "signoff_approve") {
				t.Fatalf("messages %+v, want one approval message", posts)
			}
		})
	}
}

// TestUnreadableRowIsDeliveredAsARewrite: a row whose payload cannot be read
// does not stay due forever, nor hold up the run's message: the run's
// messages are brought up to date instead.
func TestUnreadableRowIsDeliveredAsARewrite(t *testing.T) {
	h := newDispatchHarness(t)
	run := h.submitRefund(t)
	h.deliver(t)
	ctx := context.Background()
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"}, Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	err := h.store.Update(ctx, func(ctx context.Context, tx storage.Tx) error {
		return tx.EnqueueOutbox(ctx, &record.OutboxMessage{RunID: run.ID, Kind: bot.KindPost, Payload: []byte("{not json"), NextAttempt: h.clock.now, CreatedAt: h.clock.now})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.disp.DeliverDue(ctx, 0); err != nil || n != 2 {
		t.Fatalf("delivered %d (%v), want the unreadable row and the decision's rewrite", n, err)
	}
	if m := h.slack.Messages(); len(m) != 1 || m[0].Updates != 1 || !strings.Contains(m[0].Text, "executing") {
		t.Fatalf("messages %+v", m)
	}
}

// TestOtherKindsDoNotFillTheRound: due rows of another dispatcher's kind,
// however many, leave the Slack rows their place in a round.
func TestOtherKindsDoNotFillTheRound(t *testing.T) {
	h := newDispatchHarness(t)
	err := h.store.Update(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		for range 3 {
			m := &record.OutboxMessage{RunID: "run-other", Kind: "callback", Payload: []byte(`{}`), CreatedAt: h.clock.now}
			if err := tx.EnqueueOutbox(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.submitRefund(t)
	if n, err := h.disp.DeliverDue(context.Background(), 2); n != 1 || err != nil {
		t.Fatalf("delivered %d, %v; want the post", n, err)
	}
}
