package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// auditPage is how many audit events one read takes: a year's log is never
// held in memory at once.
const auditPage = 1000

// auditLine is one audit event as `audit --json` prints it and serve logs it:
// everything the chain hashes, so that whoever ingests it can recompute the
// chain (record.AuditHash over these fields, each prev_hash naming the hash
// before), and the seal, so that whoever holds the key can check it.
type auditLine struct {
	Seq int64 `json:"seq"`
	// Format says what prev_hash links to: 1, the event before by seq (the
	// global chain of events written before the log was chained per run); 2, the previous event of
	// the same run.
	Format   int             `json:"format"`
	RunID    string          `json:"run_id"`
	Actor    string          `json:"actor"`
	Action   record.Event    `json:"action"`
	Detail   json.RawMessage `json:"detail,omitempty"`
	At       time.Time       `json:"at"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
	// The checkpoint the event's transition wrote; absent for an event without one.
	CheckpointSeq  int64  `json:"checkpoint_seq,omitempty"`
	CheckpointHash string `json:"checkpoint_hash,omitempty"`
	// The seal; absent for an event written while the store was not keyed.
	KeyID string `json:"key_id,omitempty"`
	MAC   string `json:"mac,omitempty"`
}

func newAuditLine(e *record.AuditEvent) auditLine {
	return auditLine{Seq: e.Seq, Format: e.Format, RunID: e.RunID, Actor: e.Actor, Action: e.Action, Detail: e.Detail,
		At: e.At.UTC(), PrevHash: e.PrevHash, Hash: e.Hash, CheckpointSeq: e.CheckpointSeq,
		CheckpointHash: e.CheckpointHash, KeyID: e.KeyID, MAC: e.MAC}
}

// event is the line read back as the event it was printed from.
func (l auditLine) event() *record.AuditEvent {
	return &record.AuditEvent{Seq: l.Seq, Format: l.Format, RunID: l.RunID, Actor: l.Actor, Action: l.Action, Detail: []byte(l.Detail),
		At: l.At, PrevHash: l.PrevHash, Hash: l.Hash, CheckpointSeq: l.CheckpointSeq, CheckpointHash: l.CheckpointHash,
		Seal: record.Seal{KeyID: l.KeyID, MAC: l.MAC}}
}

func (c *cli) auditCmd() *cobra.Command {
	var runID, since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit [--run RUN] [--since T] [--json]",
		Short: "Print the audit log, each event with its hash and seal",
		Long: `Print the audit log, oldest first: each event with its hash, the hash before
it, its seal (key id and MAC) and the checkpoint it names. --json prints one
JSON object a line, for a SIEM: recomputing the chain over them gives what
signoff verify checks. --since takes a time (2026-01-31T00:00:00Z) or an age
(24h, 7d). It only reads.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var from time.Time
			if since != "" {
				t, err := parseSince(since, c.now())
				if err != nil {
					return usageError{"--since: " + err.Error()}
				}
				from = t
			}
			return c.withReadApp(func(a *app) error {
				enc := json.NewEncoder(c.out)
				// The detail is printed as stored, byte for byte: the hash is over it.
				enc.SetEscapeHTML(false)
				return eachAuditEvent(c.ctx, a.engine, storage.AuditFilter{RunID: runID}, func(e *record.AuditEvent) error {
					if !from.IsZero() && e.At.Before(from) {
						return nil
					}
					if asJSON {
						return writeAuditJSON(enc, e)
					}
					renderAuditEvent(c.out, e)
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "only this run's events")
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time, or within this age (24h, 7d)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines")
	return cmd
}

// writeAuditJSON writes one line. A detail that is not JSON (none is written
// so, but the line must parse whatever the store holds) goes as a string.
func writeAuditJSON(enc *json.Encoder, e *record.AuditEvent) error {
	l := newAuditLine(e)
	if len(l.Detail) > 0 && !json.Valid(l.Detail) {
		q, _ := json.Marshal(string(l.Detail))
		l.Detail = q
	}
	if err := enc.Encode(l); err != nil {
		return fmt.Errorf("write audit event %d: %w", e.Seq, err)
	}
	return nil
}

// eachAuditEvent calls fn with every audit event matching f, by seq, a page
// at a time.
func eachAuditEvent(ctx context.Context, eng *workflow.Engine, f storage.AuditFilter, fn func(*record.AuditEvent) error) error {
	f.Limit = auditPage
	for {
		evs, err := eng.AuditEvents(ctx, f)
		if err != nil {
			return fmt.Errorf("read audit log after %d: %w", f.AfterSeq, err)
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(evs) < f.Limit {
			return nil
		}
		f.AfterSeq = evs[len(evs)-1].Seq
	}
}

// renderAuditEvent prints one event on one line; everything from the store
// is made inert, since actors and details may carry what an agent wrote.
func renderAuditEvent(w io.Writer, e *record.AuditEvent) {
	fmt.Fprintf(w, "%d  %s  run %s  %s  by %s", e.Seq, e.At.UTC().Format("2006-01-02T15:04:05.000Z"),
		term(e.RunID), term(string(e.Action)), term(e.Actor))
	if len(e.Detail) > 0 {
		fmt.Fprintf(w, "  %s", term(string(e.Detail)))
	}
	if e.CheckpointSeq != 0 {
		fmt.Fprintf(w, "  checkpoint %d %s", e.CheckpointSeq, term(e.CheckpointHash))
	}
	fmt.Fprintf(w, "  hash %s", term(e.Hash))
	if e.MAC != "" {
		fmt.Fprintf(w, "  sealed %s %s", term(e.KeyID), term(e.MAC))
	} else {
		fmt.Fprint(w, "  unsealed")
	}
	fmt.Fprintln(w)
}

// parseSince reads a time (RFC 3339) or an age before now: a Go duration, or
// whole days (7d).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither a time like 2026-01-31T00:00:00Z nor an age like 24h or 7d", s)
	}
	return now.Add(-d), nil
}

// logAudit writes every audit event appended after the head at its start as
// one log line, soon after each commit that writes a run (changes, when not
// nil, says when) and every poll, until ctx ends: a live feed for a log
// pipeline. The poll catches the events no run's write comes with (a refused
// decision). Each replica that logs sees every event, so a consumer dedupes
// by hash; `signoff audit --json` is the complete record.
//
// On PostgreSQL seqs are taken before commit, so an event may become visible
// after one with a larger seq, and a rolled-back append leaves a gap that is
// never filled. So the tail reads on from the first seq it has not seen
// through (a gap), logs only what it has not logged, and gives a gap up once
// the events after it are auditGapGrace older than the newest it saw: no
// transaction holds its seq that long (the server ends one idle for 10 s).
func logAudit(ctx context.Context, eng *workflow.Engine, changes *storage.Changes, log *slog.Logger, poll time.Duration, after int64) {
	tail := &auditTail{after: after, logged: map[int64]time.Time{}}
	l := &workflow.Loop{Name: "log audit events", Changes: changes, Pace: workflow.PaceAfter(poll), Logger: log,
		Round: func(ctx context.Context) error {
			defer tail.settle()
			return eachAuditEvent(ctx, eng, storage.AuditFilter{AfterSeq: tail.after}, func(e *record.AuditEvent) error {
				if _, done := tail.logged[e.Seq]; done {
					return nil
				}
				l := newAuditLine(e)
				log.Info("audit_event", "seq", l.Seq, "format", l.Format, "run_id", l.RunID, "actor", l.Actor, "action", string(l.Action),
					"detail", string(l.Detail), "at", l.At, "prev_hash", l.PrevHash, "hash", l.Hash,
					"checkpoint_seq", l.CheckpointSeq, "checkpoint_hash", l.CheckpointHash, "key_id", l.KeyID, "mac", l.MAC)
				tail.logged[e.Seq] = e.At
				return nil
			})
		}}
	l.Run(ctx)
}

// auditGapGrace is how much newer than the events after a gap in the seqs
// the newest event must be before the tail stops waiting for the gap.
const auditGapGrace = time.Minute

// auditTail is where logAudit stands: every event up to after is logged,
// and logged holds the seqs logged beyond it, with their times.
type auditTail struct {
	after  int64
	logged map[int64]time.Time
}

// settle moves after over the seqs logged without a gap before them, and
// over gaps given up (see logAudit).
func (t *auditTail) settle() {
	var newest time.Time
	for _, at := range t.logged {
		if at.After(newest) {
			newest = at
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(t.logged)) {
		if seq != t.after+1 && newest.Sub(t.logged[seq]) < auditGapGrace {
			return
		}
		t.after = seq
		delete(t.logged, seq)
	}
}
