package workflow_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// published is an anchor kept outside the store, as serve --anchor-to does.
type published struct {
	mu sync.Mutex
	a  workflow.Anchor
}

func (p *published) set(a workflow.Anchor) { p.mu.Lock(); p.a = a; p.mu.Unlock() }
func (p *published) get() (workflow.Anchor, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.a, p.a.Seq > 0
}

// TestARewriteAfterAPublishedAnchorIsCaughtBeforeExecuting: an anchor is
// published outside the store while a run waits. Whoever can write the
// store (here even with no seals to get past) then changes what the anchor
// covers: the run's audit event it recorded, or the anchors themselves.
// The approved run sends nothing and needs a person; untouched, it runs.
func TestARewriteAfterAPublishedAnchorIsCaughtBeforeExecuting(t *testing.T) {
	tests := []struct {
		name   string
		tamper string // SQL with one ? for the run id, or "" for none
		// event, when set, changes the run's last audit event instead.
		event  func(e *record.AuditEvent)
		want   record.Status
		reason string
	}{
		{"nothing changed", "", nil, record.StatusDone, ""},
		{"the run's anchored audit event rewritten", "", func(e *record.AuditEvent) { e.Hash = strings.Repeat("0", 64) },
			record.StatusNeedsAttention, "was changed since"},
		{"the anchors deleted", `DELETE FROM audit_anchors WHERE ? <> ''`, nil, record.StatusNeedsAttention, "the store has no anchor 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &published{}
			h := newHarness(t, func(c *workflow.Config) { c.PublishedAnchor = pub.get })
			run := h.submit(refund("PAY-1", 119))
			a, err := h.engine.Anchor(ctx)
			if err != nil || a.Seq != 1 {
				t.Fatalf("anchor: %+v %v", a, err)
			}
			pub.set(a)
			if tt.tamper != "" || tt.event != nil {
				db, err := sqlite.OpenDB(h.path)
				if err != nil {
					t.Fatal(err)
				}
				if tt.tamper != "" {
					if _, err := db.Exec(tt.tamper, run.ID); err != nil {
						t.Fatal(err)
					}
				}
				if tt.event != nil {
					// The run's last event, wherever the store keeps it.
					var last int64
					if err := sqlite.EditAuditEvents(ctx, db, func(e *record.AuditEvent) bool {
						if e.RunID == run.ID {
							last = e.Seq
						}
						return true
					}); err != nil {
						t.Fatal(err)
					}
					if err := sqlite.EditAuditEvents(ctx, db, func(e *record.AuditEvent) bool {
						if e.Seq == last {
							tt.event(e)
						}
						return true
					}); err != nil {
						t.Fatal(err)
					}
				}
				db.Close()
			}
			got, err := h.approve(run.ID, "U0LEAD0001")
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("status %s (%q), want %s (%q)", got.Status, got.Reason, tt.want, tt.reason)
			}
			if calls := h.target.calls; (tt.want == record.StatusDone) != (calls == 1) {
				t.Fatalf("%d calls to the target", calls)
			}
		})
	}
}
