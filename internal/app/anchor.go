package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/workflow"
)

// anchorSink is where serve publishes audit anchors, outside the store, so
// that a rewrite of what an anchor covers can be shown (verify) and is
// caught before the next execute (workflow.Config.PublishedAnchor).
type anchorSink interface {
	// publish records a outside the store; an error is retried next round.
	publish(ctx context.Context, a workflow.Anchor, at time.Time) error
	// latest is the newest anchor published (by this process, or found in
	// the file at start), or false before any.
	latest() (workflow.Anchor, bool)
	// where names the sink for people.
	where() string
}

// newAnchorSink is the sink to names (see config.AnchorsConfig.To).
func newAnchorSink(to string, getenv func(string) string, log *slog.Logger) (anchorSink, error) {
	switch {
	case to == "" || to == "log":
		return &logSink{log: log}, nil
	case strings.HasPrefix(to, "http://") || strings.HasPrefix(to, "https://"):
		return &urlSink{url: to, token: getenv("SIGNOFF_ANCHOR_TOKEN"), client: &http.Client{Timeout: 10 * time.Second}}, nil
	}
	f := &fileSink{path: strings.TrimPrefix(to, "file:")}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// newest keeps the newest anchor published, for latest.
type newest struct {
	mu sync.Mutex
	a  workflow.Anchor
}

func (n *newest) set(a workflow.Anchor) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a.Seq > n.a.Seq {
		n.a = a
	}
}

func (n *newest) latest() (workflow.Anchor, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.a, n.a.Seq > 0
}

// logSink logs each anchor: a log pipeline the database's writers cannot
// reach holds them.
type logSink struct {
	newest
	log *slog.Logger
}

func (s *logSink) publish(_ context.Context, a workflow.Anchor, _ time.Time) error {
	s.log.Info("audit anchor", "anchor", a.String(), "id", a.Seq, "hash", a.Hash)
	s.set(a)
	return nil
}

func (s *logSink) where() string { return "the log" }

// fileSink appends each anchor to a file, one line each (A12:HASH and the
// time), synced before it counts as published.
type fileSink struct {
	newest
	path string
}

// load takes the newest anchor already in the file, which a restarted
// process checks runs against before publishing one of its own.
func (s *fileSink) load() error {
	a, err := newestAnchorIn(s.path)
	if err != nil {
		return err
	}
	s.set(a)
	return nil
}

func (s *fileSink) publish(_ context.Context, a workflow.Anchor, at time.Time) error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("publish anchor %s: %w", a, err)
	}
	_, err = fmt.Fprintf(f, "%s %s\n", a, at.UTC().Format(time.RFC3339))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("publish anchor %s to %s: %w", a, s.path, err)
	}
	s.set(a)
	return nil
}

func (s *fileSink) where() string { return s.path }

// newestAnchorIn reads the newest anchor of an anchor file (zero when there
// is none yet). A line that is not an anchor is an error: the file is
// signoff's, and something else wrote it.
func newestAnchorIn(path string) (workflow.Anchor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return workflow.Anchor{}, nil
	}
	if err != nil {
		return workflow.Anchor{}, fmt.Errorf("read anchors %s: %w", path, err)
	}
	var out workflow.Anchor
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		field, _, _ := strings.Cut(line, " ")
		a, err := workflow.ParseAnchor(field)
		if err != nil {
			return workflow.Anchor{}, fmt.Errorf("anchors %s:%d: %v", path, i+1, err)
		}
		if a.Seq > out.Seq {
			out = a
		}
	}
	return out, nil
}

// urlSink POSTs each anchor as JSON to a URL (with SIGNOFF_ANCHOR_TOKEN as a
// bearer token when set): a 2xx answer publishes it.
type urlSink struct {
	newest
	url, token string
	client     *http.Client
}

func (s *urlSink) publish(ctx context.Context, a workflow.Anchor, at time.Time) error {
	body, err := json.Marshal(map[string]any{"anchor": a.String(), "id": a.Seq, "hash": a.Hash, "at": at.UTC()})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("publish anchor %s: %w", a, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "signoff")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("publish anchor %s: %w", a, err)
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("publish anchor %s: %s answered %d", a, s.url, res.StatusCode)
	}
	s.set(a)
	return nil
}

func (s *urlSink) where() string { return s.url }

// placementWarnings are what serve says at start of integrity keys and
// anchors kept in the store's folder, where they protect against less than
// one may think.
func placementWarnings(o options, getenv func(string) string, anchors anchorSink) []string {
	if isPostgres(o.db) {
		return nil
	}
	var out []string
	if src := keySource(o, getenv); src != "" && src != "SIGNOFF_KEYS" && sameDir(src, o.db) {
		out = append(out, fmt.Sprintf("the integrity keys (%s) are in the store's folder: they protect the records only against someone "+
			"who can change the database but not read that folder, since whoever can read the keys can forge seals that verify. "+
			"Keep them where the store's readers cannot reach: a file of another user (--keys), a secret manager, or the environment of the unit (SIGNOFF_KEYS)", src))
	}
	if fs, ok := anchors.(*fileSink); ok && sameDir(fs.path, o.db) {
		out = append(out, fmt.Sprintf("the anchors file (%s) is in the store's folder: whoever can rewrite the store can rewrite the anchors too. "+
			"Publish them where the store's writers cannot write: a log pipeline (anchors.to: log), a URL, or a file of another user on another disk", fs.path))
	}
	return out
}

// sameDir says whether two paths are in one folder.
func sameDir(a, b string) bool {
	da, err1 := filepath.Abs(filepath.Dir(a))
	db, err2 := filepath.Abs(filepath.Dir(b))
	return err1 == nil && err2 == nil && da == db
}

// publishAnchors writes an audit anchor (a sealed record committing to every
// run's audit events so far) at start and then every period, and publishes
// it to sink, so that a rewritten or cut audit log no longer extends what
// is kept outside the store. Replicas that all do so take turns and anchor
// what moved since. An anchor that could not be published is published
// again at the next round.
func publishAnchors(ctx context.Context, eng *workflow.Engine, sink anchorSink, log *slog.Logger, period time.Duration) {
	l := &workflow.Loop{Name: "publish an audit anchor", Pace: workflow.PaceEvery(period), Logger: log,
		Round: func(ctx context.Context) error {
			a, err := eng.Anchor(ctx)
			if err != nil {
				return err
			}
			if last, _ := sink.latest(); a == last || a.Seq == 0 {
				return nil
			}
			if err := sink.publish(ctx, a, time.Now()); err != nil {
				return err
			}
			if _, isLog := sink.(*logSink); !isLog {
				log.Info("audit anchor published", "anchor", a.String(), "to", sink.where())
			}
			return nil
		}}
	l.Run(ctx)
}

func (c *cli) anchorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "anchor",
		Short: "Write an audit anchor and print it (A12:HASH), to keep where the database's writers cannot reach",
		Long: `Write an audit anchor: a sealed record, chained to the one before, that
commits to every run's audit events so far. It prints the anchor (A12:HASH):
keep it somewhere the database's writers cannot reach, and
verify --anchor A12:HASH proves later that the log still extends it. serve
writes and logs one every ten minutes; when nothing was audited since the
last, that one is printed again.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withApp(func(a *app) error {
				an, err := a.engine.Anchor(c.ctx)
				if err != nil {
					return err
				}
				if an.Seq == 0 {
					fmt.Fprintln(c.out, "nothing audited yet: no anchor")
					return nil
				}
				fmt.Fprintf(c.out, "audit anchor: %s\n", an)
				return nil
			})
		},
	}
}
