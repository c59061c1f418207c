package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/counting"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// countedHarness is the harness on a store that counts its commits, on
// SQLite or PostgreSQL.
func countedHarness(t *testing.T, driver string) (*harness, *counting.Store) {
	t.Helper()
	ctx := context.Background()
	var st storage.Store
	switch driver {
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "signoff.db"))
		if err != nil {
			t.Fatal(err)
		}
		st = s
	case "postgres":
		dsn := pgtest.Schema(t)
		if _, err := postgres.Migrate(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		st = s
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles(testRoles)
	if err != nil {
		t.Fatal(err)
	}
	counted := counting.New(st)
	h := &harness{t: t, target: newLedger(), clock: newFakeClock(), roles: roles}
	h.build(counted, testPolicy(t, "rev-1", roles))
	return h, counted
}

func seenRequest(t *testing.T, st storage.Store, digest string) *record.SeenRequest {
	t.Helper()
	var r *record.SeenRequest
	err := st.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		r, err = tx.SeenRequest(ctx, digest)
		return err
	})
	if err != nil {
		t.Fatalf("the claimed request %s: %v", digest, err)
	}
	return r
}

// TestADecisionWithItsClaimIsOneCommit: a decision that carries the request
// it came in (a Slack click) claims it, records the decision or the
// refusal, and keeps the request's answer in one commit. A copy of the
// request then decides nothing, audits nothing and commits nothing, and is
// given the first copy's answer.
func TestADecisionWithItsClaimIsOneCommit(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, tc := range []struct {
			name       string
			who        string
			late       bool // the deadline has passed: the run expires
			wantCode   string
			wantStatus record.Status
			commits    int64
		}{
			{name: "approval", who: "U0LEAD0001", wantStatus: record.StatusExecuting, commits: 1},
			{name: "refused: no role", who: "U0NOBODY01", wantCode: record.CodeNoRole, wantStatus: record.StatusWaitingApproval, commits: 1},
			{name: "refused: the requester", who: "agent:resolver", wantCode: record.CodeNoRole, wantStatus: record.StatusWaitingApproval, commits: 1},
			// The expiry is a change of the run's own; the refusal and the claim are one more.
			{name: "refused: too late", who: "U0LEAD0001", late: true, wantCode: record.CodeExpired, wantStatus: record.StatusExpired, commits: 2},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				if driver == "postgres" {
					pgtest.DSN(t)
				}
				h, counted := countedHarness(t, driver)
				ctx := context.Background()
				run := h.submit(refund("PAY-1", 119))
				if tc.late {
					h.clock.Advance(73 * time.Hour)
				}
				claim := func() *record.SeenRequest {
					return &record.SeenRequest{Digest: "d-" + run.ID, CreatedAt: h.clock.Now(), ExpiresAt: h.clock.Now().Add(time.Hour),
						AnsweredAt: h.clock.Now(), Status: 200}
				}
				in := workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: tc.who}, Verdict: record.VerdictApprove, Via: record.ViaSlack}
				in.Claim = claim()
				audits, commits := h.auditCount(run.ID), counted.Commits()
				_, err := h.engine.Decide(ctx, in)
				if tc.wantCode == "" && err != nil {
					t.Fatalf("decide: %v", err)
				}
				if tc.wantCode != "" {
					wantRefused(t, err, tc.wantCode)
				}
				if got := counted.Commits() - commits; got != tc.commits {
					t.Errorf("%d commits for the decision and its claim, want %d", got, tc.commits)
				}
				if st := h.get(run.ID).Status; st != tc.wantStatus {
					t.Errorf("run %s after the decision, want %s", st, tc.wantStatus)
				}
				if got := seenRequest(t, counted, in.Claim.Digest); !got.Answered() || got.Status != 200 {
					t.Errorf("the claim as stored: %+v, want answered 200", got)
				}
				if tc.wantCode != "" && h.events(run.ID, record.EventRefused) != 1 {
					t.Errorf("%d refusals audited, want 1", h.events(run.ID, record.EventRefused))
				}
				if h.auditCount(run.ID) == audits {
					t.Error("nothing audited")
				}

				before, audits, commits := h.snapshot(run.ID), h.auditCount(run.ID), counted.Commits()
				in.Claim = claim()
				_, err = h.engine.Decide(ctx, in)
				var replayed *workflow.ReplayedError
				if !errors.As(err, &replayed) || replayed.First.Status != 200 || !replayed.First.Answered() {
					t.Fatalf("a copy: %v, want the first copy's answer", err)
				}
				if got := counted.Commits() - commits; got != 0 {
					t.Errorf("a copy committed %d times", got)
				}
				if h.snapshot(run.ID) != before || h.auditCount(run.ID) != audits {
					t.Error("a copy changed the run or its audit log")
				}
			})
		}
	}
}

// TestADecisionWhoseRequestWasClaimedDecidesNothing: a request claimed and
// never answered (its process died handling it) decides nothing when it
// comes again, and says it has no answer.
func TestADecisionWhoseRequestWasClaimedDecidesNothing(t *testing.T) {
	h, counted := countedHarness(t, "sqlite")
	ctx := context.Background()
	run := h.submit(refund("PAY-1", 119))
	r := &record.SeenRequest{Digest: "crashed", CreatedAt: h.clock.Now(), ExpiresAt: h.clock.Now().Add(time.Hour)}
	if _, _, err := h.engine.Replays().Claim(ctx, r); err != nil {
		t.Fatal(err)
	}
	before, commits := h.snapshot(run.ID), counted.Commits()
	claim := *r
	claim.AnsweredAt, claim.Status = h.clock.Now(), 200
	_, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD0001"},
		Verdict: record.VerdictApprove, Via: record.ViaSlack, Claim: &claim})
	var replayed *workflow.ReplayedError
	if !errors.As(err, &replayed) || replayed.First.Answered() {
		t.Fatalf("decide with a request claimed before: %v, want a replay without an answer", err)
	}
	if h.snapshot(run.ID) != before || counted.Commits() != commits {
		t.Error("the copy changed something")
	}
}
