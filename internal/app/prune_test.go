package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/callback"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// laterClock is the time 100 days from now: every run made now ended more
// than 90 days before it.
type laterClock struct{}

func (laterClock) Now() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
func (laterClock) Sleep(ctx context.Context, d time.Duration) error {
	return ctx.Err()
}

// signoffLater runs one command in process as if 100 days had passed.
func signoffLater(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{ctx: t.Context(), getenv: noEnv, stdin: strings.NewReader(""), out: &out, errOut: &errb, clock: laterClock{}}
	code := c.execute(append([]string{"--db", dbPath(dir), "--shop", shopPath(dir)}, args...))
	return code, out.String(), errb.String()
}

// storeText is what a prune could change, as the read commands show it.
func storeText(t *testing.T, dir string, ids ...string) string {
	t.Helper()
	s := must(t, dir, 0, "runs", "--json") + must(t, dir, 0, "audit", "--json")
	for _, id := range ids {
		s += must(t, dir, 0, "history", id, "--json")
	}
	return s
}

// TestPruneCommand: bad ages are refused with exit 2 and change nothing; a
// dry run says what it would remove and changes nothing; the prune removes
// the ended runs' states, leaves the waiting run approvable, verify passes,
// and show (and show --json) of a pruned run says what was pruned and kept.
// The dry run and the prune are those of the docs' Retention.
func TestPruneCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	done := runIDOf(t, must(t, dir, exitDone, "submit", fixture("small-refund.json")))
	rejected := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("reship-planter.json")))
	must(t, dir, exitEnded, "reject", rejected, "--as", lead1, "--reason", "not this one")
	waiting := runIDOf(t, must(t, dir, exitWaiting, "submit", fixture("refund-double-charge.json")))
	start := storeText(t, dir, done, rejected, waiting)

	for _, bad := range [][]string{
		{"prune", "--older-than", "banana"},
		{"prune", "--older-than", "-5d"},
		{"prune", "--older-than", "0"},
		{"prune", "--older-than", "0d"},
		{"prune"},
	} {
		code, out, errs := signoffLater(t, dir, bad...)
		if code != exitRefused || !strings.Contains(errs, "older-than") {
			t.Errorf("signoff %s: exit %d, want %d, saying what is wrong with --older-than\nstdout: %s\nstderr: %s",
				strings.Join(bad, " "), code, exitRefused, out, errs)
		}
	}
	if storeText(t, dir, done, rejected, waiting) != start {
		t.Fatal("a refused prune changed the store")
	}

	// The dry run and the prune as the docs write them.
	var docs [][]string
	for _, block := range blocksOf(docSection(t, "docs/operations.md", "Retention"), "sh") {
		for _, l := range shLines(block) {
			docs = append(docs, shellWords(t, l.cmd))
		}
	}
	if len(docs) < 2 || !slices.Equal(docs[0], []string{"signoff", "prune", "--older-than", "90d", "--dry-run"}) ||
		!slices.Equal(docs[1], []string{"signoff", "prune", "--older-than", "90d"}) {
		t.Fatalf("Retention shows %q, want the dry run and the prune of runs older than 90 days", docs)
	}
	code, out, errs := signoffLater(t, dir, docs[0][1:]...)
	if code != 0 || !strings.Contains(out, "would prune 2 run(s)") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	if storeText(t, dir, done, rejected, waiting) != start {
		t.Fatal("the dry run changed the store")
	}

	code, out, errs = signoffLater(t, dir, docs[1][1:]...)
	if code != 0 || !strings.Contains(out, "pruned 2 run(s)") || !strings.Contains(out, "file: ") {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errs)
	}
	t.Logf("prune said:\n%s", out)
	must(t, dir, 0, "verify")

	text := must(t, dir, exitEnded, "show", rejected)
	if !strings.Contains(text, "pruned ") || !strings.Contains(text, "kept: ") {
		t.Fatalf("show of a pruned run does not say it was pruned:\n%s", text)
	}
	v := showJSON(t, dir, done)
	if v.Pruned == nil || v.Pruned.At.IsZero() || v.Problem != "" || len(v.Evidence) != 0 || len(v.Operations) != 1 {
		t.Fatalf("show --json of a pruned run: %+v", v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(showRaw(t, dir, done)), &raw); err != nil || raw["pruned"] == nil {
		t.Fatalf("show --json has no pruned object: %v", err)
	}

	must(t, dir, exitDone, "approve", waiting, "--as", lead1)
	must(t, dir, 0, "verify")
	code, out, _ = signoffLater(t, dir, "prune", "--older-than", "90d")
	if code != 0 || !strings.Contains(out, "pruned 1 run(s)") {
		// The run approved just now ended too, 100 days before the clock.
		t.Fatalf("a second prune: exit %d\n%s", code, out)
	}
}

// TestServePrunesOnItsTicks: what serve runs for retention: prunes at start
// and at each tick, with the cutoff taken from its clock at that tick.
func TestServePrunesOnItsTicks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := runIDOf(t, must(t, dir, exitDone, "submit", fixture("small-refund.json")))
	o := options{db: dbPath(dir), shop: shopPath(dir), quietBuiltin: true}
	a, err := openApp(t.Context(), o, noEnv, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := make(chan time.Time, 1)
	clock := time.Now()
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pruneLoop(a, 90*24*time.Hour, clocktest.Chan(now), tickPace(ticks)).Run(ctx)
	}()
	now <- clock // at start: nothing ended 90 days ago
	now <- clock.Add(100 * 24 * time.Hour)
	// The second clock read happens only after the first prune and a tick.
	ticks <- time.Time{}
	now <- clock.Add(100 * 24 * time.Hour) // a third prune: nothing left
	ticks <- time.Time{}
	cancel()
	<-done
	if v := showJSON(t, dir, first); v.Pruned == nil {
		t.Fatalf("the run was not pruned at the tick: %+v", v)
	}
}

// tickPace paces a loop by the test's hand: its next round comes when the
// test sends on the channel.
type tickPace <-chan time.Time

func (p tickPace) Next() <-chan time.Time { return p }
func (tickPace) Stop()                    {}

// TestPruneNamesWhatItRemoved: a run whose Slack messages and callbacks were
// delivered is pruned. The report and show count each kind as what it is,
// as many as left the outbox; runs still shows the run's action and summary
// (from the summary the prune keeps); history labels each pruned checkpoint
// with the day of the prune, and the summary as the prune's.
func TestPruneNamesWhatItRemoved(t *testing.T) {
	t.Parallel()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	hooks := newHookReceiver(t)
	dir := t.TempDir()
	prefix := hooks.srv.URL + "/hooks/"
	cfg := callbackConfig(t, dir, fs, prefix)
	env := map[string]string{"SIGNOFF_CALLBACK_SECRET": callbackSecret, "SLACK_BOT_TOKEN": serveToken}
	code, out, errs := cliWith(t, dir, cfg, env, "submit", proposal(t, dir, "p.json", withCallback(prefix+"a")))
	if code != exitWaiting {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	id := runIDOf(t, out)
	if code, out, errs := cliWith(t, dir, cfg, env, "approve", id, "--as", lead1); code != exitDone {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
	}
	deliverOutbox(t, dir, cfg, env)
	delivered := deliveredByKind(t, dir)
	slack, callbacks := 0, delivered[callback.Kind]
	for _, k := range bot.Kinds {
		slack += delivered[k]
	}
	if slack == 0 || callbacks == 0 || len(hooks.events()) != callbacks {
		t.Fatalf("delivered %v, the receiver got %d", delivered, len(hooks.events()))
	}
	listed := must(t, dir, 0, "runs")

	code, out, errs = signoffLater(t, dir, "--config", cfg, "prune", "--older-than", "90d")
	removed := fmt.Sprintf("%d delivered Slack message(s) and %d delivered callback(s)", slack, callbacks)
	if code != 0 || !strings.Contains(out, "pruned 1 run(s)") || !strings.Contains(out, removed+" (") {
		t.Fatalf("prune: exit %d, want it to say %q\n%s%s", code, removed, out, errs)
	}
	if left := deliveredByKind(t, dir); len(left) != 0 {
		t.Fatalf("delivered rows left after the prune: %v", left)
	}
	if text := must(t, dir, exitDone, "show", id); !strings.Contains(text, removed+" were removed") {
		t.Fatalf("show of the pruned run does not say %q:\n%s", removed, text)
	}

	if got := must(t, dir, 0, "runs"); got != listed || !strings.Contains(got, "request_refund") || !strings.Contains(got, "Refund the duplicate charge.") {
		t.Fatalf("runs before the prune:\n%s\nafter:\n%s", listed, got)
	}

	v := showJSON(t, dir, id)
	if v.Pruned == nil {
		t.Fatalf("show --json has no pruned record: %+v", v)
	}
	day := v.Pruned.At.UTC().Format(time.DateOnly)
	lines := strings.Split(strings.TrimSpace(must(t, dir, exitDone, "history", id)), "\n")[1:]
	if int64(len(lines)) != v.Pruned.ThroughSeq+1 {
		t.Fatalf("history has %d checkpoints, want %d:\n%s", len(lines), v.Pruned.ThroughSeq+1, strings.Join(lines, "\n"))
	}
	pruned := regexp.MustCompile(`^\d+\s+\S+\s+-\s+-\s+pruned on ` + day + `\s+[0-9a-f]{16}$`)
	for _, line := range lines[:len(lines)-1] {
		if !pruned.MatchString(line) {
			t.Errorf("a pruned checkpoint in history: %q, want it labelled pruned on %s", line, day)
		}
	}
	summary := regexp.MustCompile(fmt.Sprintf(`\sdone\s+0\s+summary written by the prune of 1-%d; done\s`, v.Pruned.ThroughSeq))
	if last := lines[len(lines)-1]; !summary.MatchString(last) {
		t.Errorf("the summary in history: %q, want it to match %s", last, summary)
	}
}

// deliverOutbox delivers every Slack message and callback of dir's store,
// as serve's dispatchers would.
func deliverOutbox(t *testing.T, dir, cfg string, env map[string]string) {
	t.Helper()
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg}, func(k string) string { return env[k] }, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cb, err := callbackDispatcher(a)
	if err != nil {
		t.Fatal(err)
	}
	slack := &bot.Dispatcher{Engine: a.engine, Slack: a.slackAPI, Channel: a.cfg.Slack.Channel, Logger: a.log,
		Render: bot.NewRenderer(a.engine, a.engine.Roles(), nil, "", "", workflow.SystemClock{})}
	for {
		n, err := slack.DeliverDue(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cb.DeliverDue(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if n+m == 0 {
			return
		}
	}
}

// deliveredByKind counts the delivered outbox rows of dir's store by kind.
func deliveredByKind(t *testing.T, dir string) map[record.OutboxKind]int {
	t.Helper()
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT kind, COUNT(*) FROM outbox WHERE delivered_at <> 0 GROUP BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[record.OutboxKind]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[record.OutboxKind(k)] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
