package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// TestDigestDocExample: the digests of docs/slack.md load as the section
// says.
func TestDigestDocExample(t *testing.T) {
	blocks := blocksOf(docSection(t, "docs/slack.md", "A daily digest per channel"), "yaml")
	if len(blocks) != 1 {
		t.Fatalf("%d yaml blocks, want 1", len(blocks))
	}
	c, err := config.Parse("signoff.yaml", append(config.DefaultYAML(), "\n"+blocks[0]...))
	if err != nil {
		t.Fatal(err)
	}
	ds := c.Slack.Digests
	if len(ds) != 2 || ds[0].Channel != "C0APPROVALS" || ds[0].Hour != 9 || ds[0].Minute != 0 || ds[0].Location.String() != "Europe/Paris" ||
		ds[1].Channel != "C0SUPPORTLEADS" || ds[1].Hour != 8 || ds[1].Minute != 30 || ds[1].Location.String() != "America/New_York" {
		t.Fatalf("digests %+v", ds)
	}
}

// digestServer is serve on the files of dir, reading clock, with the daily
// digests looking at it every 10ms.
type digestServer struct {
	app  *app
	srv  *server
	stop context.CancelFunc
	log  *wakingLog
}

// wakingLog is a log that tells wake of every line.
type wakingLog struct {
	lockedBuffer
	wake chan struct{}
}

func (l *wakingLog) Write(p []byte) (int, error) {
	n, err := l.lockedBuffer.Write(p)
	select {
	case l.wake <- struct{}{}:
	default: // a wake is pending already
	}
	return n, err
}

func startDigestServer(t *testing.T, dir, cfgPath string, clock workflow.Clock, wake chan struct{}) *digestServer {
	t.Helper()
	env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken}
	o := options{db: filepath.Join(dir, "signoff.db"), shop: filepath.Join(dir, "shop.db"), config: cfgPath, server: true}
	ctx, cancel := context.WithCancel(context.Background())
	log := &wakingLog{wake: wake}
	a, err := openApp(ctx, o, func(k string) string { return env[k] }, log, clock)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, err := startServer(ctx, a, serveOptions{addr: "127.0.0.1:0", signingSecret: serveSecret, botToken: serveToken,
		poll: 20 * time.Millisecond, digestEvery: 10 * time.Millisecond})
	if err != nil {
		cancel()
		a.Close()
		t.Fatal(err)
	}
	return &digestServer{app: a, srv: s, stop: cancel, log: log}
}

// close stops the server as a shutdown does: every loop ends first.
func (d *digestServer) close(t *testing.T) {
	t.Helper()
	d.stop()
	if err := d.srv.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	d.app.Close()
}

// posts are the messages posted in channel.
func posts(fs *fakeslack.Server, channel string) []fakeslack.Message {
	var ms []fakeslack.Message
	for _, m := range fs.Messages() {
		if m.Channel == channel {
			ms = append(ms, m)
		}
	}
	return ms
}

// until waits, bounded, for cond, looking again after every call to the
// fake Slack and every line logged.
func until(t *testing.T, fs *fakeslack.Server, wake <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	bound := time.After(clocktest.WaitBound)
	for !cond() {
		select {
		case <-fs.Notify():
		case <-wake:
		case <-bound:
			t.Fatalf("never: %s", what)
		}
	}
}

// TestServeDigestAcrossRestarts: digests whose time passed while serve was
// down are posted once when it comes back that day; serve started again the
// same day posts none again; the next day has its own.
func TestServeDigestAcrossRestarts(t *testing.T) {
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "signoff.yaml")
	// The digests go under slack:, before the api: section slackConfig ends with.
	yaml := strings.Replace(slackConfig(fs), "\napi:\n", `
  digests:
    - {at: "09:00", tz: Europe/Paris, channel: C0DIGESTA}
    - {at: "11:30", tz: Europe/Paris, channel: C0DIGESTB}
api:
`, 1)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// A day in the past: the dispatcher delivers by the system's clock.
	clock := clocktest.New(time.Date(2025, 12, 1, 8, 0, 0, 0, paris))
	wake := make(chan struct{}, 1)

	first := startDigestServer(t, dir, cfgPath, clock, wake)
	body, err := fixtures.Proposal("refund-double-charge")
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	run, err := first.app.engine.Submit(context.Background(), p)
	if err != nil || run.Status != record.StatusWaitingApproval {
		t.Fatalf("submit: %v %v", run, err)
	}
	until(t, fs, wake, "the approval message is posted", func() bool { return len(posts(fs, "C0APPROVALS")) == 1 })
	first.close(t)
	if n := len(posts(fs, "C0DIGESTA")) + len(posts(fs, "C0DIGESTB")); n != 0 {
		t.Fatalf("%d digests posted before their time", n)
	}

	// Down from 08:00 to 12:00: both digests came due meanwhile.
	clock.Set(time.Date(2025, 12, 1, 12, 0, 0, 0, paris))
	second := startDigestServer(t, dir, cfgPath, clock, wake)
	until(t, fs, wake, "both digests are posted", func() bool {
		return len(posts(fs, "C0DIGESTA")) > 0 && len(posts(fs, "C0DIGESTB")) > 0
	})
	second.close(t)
	a := posts(fs, "C0DIGESTA")
	if len(a) != 1 || len(posts(fs, "C0DIGESTB")) != 1 {
		t.Fatalf("digests posted: %+v %+v, want one each", a, posts(fs, "C0DIGESTB"))
	}
	if !strings.Contains(a[0].Blocks, run.ID) || !strings.Contains(a[0].Text, "1 run(s) waiting") {
		t.Errorf("the digest does not list %s: %s %s", run.ID, a[0].Text, a[0].Blocks)
	}

	// Started again the same day: both find their digest queued.
	clock.Set(time.Date(2025, 12, 1, 15, 0, 0, 0, paris))
	third := startDigestServer(t, dir, cfgPath, clock, wake)
	for _, ch := range []string{"C0DIGESTA", "C0DIGESTB"} {
		until(t, fs, wake, ch+"'s digest is found queued", func() bool {
			return strings.Contains(third.log.String(), fmt.Sprintf("slack digest queued already\" channel=%s", ch)) ||
				strings.Contains(third.log.String(), fmt.Sprintf(`"msg":"slack digest queued already","channel":"%s"`, ch))
		})
	}
	// The next morning, the same server: A's time has come, B's not.
	clock.Set(time.Date(2025, 12, 2, 9, 0, 0, 0, paris))
	until(t, fs, wake, "the next day's digest is posted", func() bool { return len(posts(fs, "C0DIGESTA")) == 2 })
	third.close(t)
	if a, b := posts(fs, "C0DIGESTA"), posts(fs, "C0DIGESTB"); len(a) != 2 || len(b) != 1 {
		t.Fatalf("digests posted: %d in A, %d in B; want 2 and 1", len(a), len(b))
	}
}
