package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// testKeys is the integrity key of the tamper tests: kept outside the store,
// as a key file or environment variable would be.
func testKeys(t testing.TB) *keyring.Ring {
	t.Helper()
	k, err := keyring.Parse("test-1:" + strings.Repeat("c2lnbm9mZi10ZXN0LWtleS0", 2) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func withKeys(k *keyring.Ring) harnessOption {
	return func(c *workflow.Config) { c.Keys = k }
}

// tamperEnv is a harness with keys whose store an attacker can also write
// with plain SQL (placeholders written ?), on either driver.
type tamperEnv struct {
	h      *harness
	exec   func(query string, args ...any)
	reopen func() // a new process: same store and keys, no failpoint
	// events hands every audit event to edit in seq order, as stored, and
	// writes back what it leaves (false: deletes it), wherever the store
	// keeps it.
	events func(edit func(e *record.AuditEvent) (keep bool))
}

// auditRowEdit is tamperEnv.events for a store that keeps every event in
// a row of audit (PostgreSQL).
func auditRowEdit(t *testing.T, env *tamperEnv) func(func(*record.AuditEvent) bool) {
	return func(edit func(*record.AuditEvent) bool) {
		t.Helper()
		var evs []*record.AuditEvent
		if err := env.h.engine.Store().View(ctx, func(ctx context.Context, tx storage.Tx) error {
			var err error
			evs, err = tx.AuditEvents(ctx, storage.AuditFilter{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			seq := e.Seq
			if !edit(e) {
				env.exec(`DELETE FROM audit WHERE seq = ?`, seq)
				continue
			}
			env.exec(`UPDATE audit SET seq = ?, actor = ?, action = ?, detail = ?, at = ?, prev_hash = ?, hash = ?,
				checkpoint_seq = ?, checkpoint_hash = ?, key_id = ?, mac = ? WHERE seq = ?`,
				e.Seq, e.Actor, e.Action, e.Detail, e.At.UnixMilli(), e.PrevHash, e.Hash, e.CheckpointSeq, e.CheckpointHash, e.KeyID, e.MAC, seq)
		}
	}
}

func sqliteTamperEnv(t *testing.T, opts ...harnessOption) *tamperEnv {
	keys := testKeys(t)
	h := newHarness(t, append([]harnessOption{withKeys(keys)}, opts...)...)
	return &tamperEnv{h: h,
		exec: func(q string, args ...any) {
			db, err := sqlite.OpenDB(h.path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		reopen: func() { h.open(testPolicy(t, "rev-1", h.roles), withKeys(keys)) },
		events: func(edit func(*record.AuditEvent) bool) {
			t.Helper()
			db, err := sqlite.OpenDB(h.path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := sqlite.EditAuditEvents(ctx, db, edit); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func postgresTamperEnv(t *testing.T, opts ...harnessOption) *tamperEnv {
	dsn := pgtest.Schema(t)
	if _, err := postgres.Migrate(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles(testRoles)
	if err != nil {
		t.Fatal(err)
	}
	keys := testKeys(t)
	h := &harness{t: t, target: newLedger(), clock: newFakeClock(), roles: roles}
	h.build(st, testPolicy(t, "rev-1", roles), append([]harnessOption{withKeys(keys)}, opts...)...)
	env := &tamperEnv{h: h,
		exec: func(q string, args ...any) {
			n := 0
			q = rebind(q, &n)
			pgtest.Exec(t, dsn, q, args...)
		},
		reopen: func() { h.build(st, testPolicy(t, "rev-1", roles), withKeys(keys)) },
	}
	env.events = auditRowEdit(t, env)
	return env
}

func rebind(q string, n *int) string {
	var b strings.Builder
	for _, r := range q {
		if r == '?' {
			*n++
			fmt.Fprintf(&b, "$%d", *n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tamperCase changes one column of one row. Unless it changes a hash itself,
// the attacker then recomputes every unkeyed hash (both chains) so that only
// the seals can tell.
type tamperCase struct {
	table, column string
	set           string // the SQL expression of the new value
	arg           any    // bound to a ? in set, if any
	where         string // which row, by the run
	rehash        bool
	also          string // another statement on the run's rows (one ?, the run id)
	driver        string // the one store whose layout has the column ("": both)
	// event, when set, changes a field of the run's decided event where the
	// store keeps it, instead of a column by SQL.
	event func(e *record.AuditEvent)
	// retried: the run's first attempt failed and waits for its retry, so
	// that its operation has a row (an intent alone is kept in its
	// checkpoint, which the checkpoint cases cover).
	retried bool
}

// name names the case in its subtest: the column, and the state's field
// when the case forges one.
func (tc tamperCase) name() string {
	if f, ok := tc.arg.(string); ok && tc.column == "state" {
		return tc.table + "." + tc.column + "." + f
	}
	return tc.table + "." + tc.column
}

// A callback URL is sealed like the rest: a run's events never go where an
// attacker with the database pointed them.
const (
	goodCallback = "https://agent.example/signoff/events"
	evilCallback = "https://agent.example/signoff/../../evil"
)

func allowCallbacks(c *workflow.Config) {
	c.CallbackAllowed = func(u string) bool { return strings.HasPrefix(u, "https://agent.example/signoff/") }
	c.CallbackPrefixes = []string{"https://agent.example/signoff/"}
}

func tamperCases() []tamperCase {
	var cases []tamperCase
	add := func(table, where string, rehash bool, cols map[string]string) {
		for col, set := range cols {
			cases = append(cases, tamperCase{table: table, column: col, set: set, where: where, rehash: rehash && col != "hash" && col != "prev_hash"})
		}
	}
	byRun := "run_id = ?"
	add("checkpoints", byRun+" AND seq = 2", true, map[string]string{
		"state": "?", "prev_hash": "'" + strings.Repeat("0", 64) + "'", "hash": "'" + strings.Repeat("1", 64) + "'",
		"created_at": "created_at + 1", "schema_version": "schema_version + 1", "key_id": "'other'", "mac": "'" + strings.Repeat("2", 64) + "'",
		"base_seq": "base_seq + 1",
	})
	add("approval_requests", byRun, true, map[string]string{
		"fingerprint": "'" + strings.Repeat("3", 64) + "'", "rule": "'small-refund'", "policy_revision": "'rev-0'", "risk": "'low'",
		"role": "'agent'", "count": "count + 1", "self_approval": "NOT self_approval", "edit": "NOT edit",
		"requester_id": "'U0LEAD0001'", "deadline": "deadline + 86400000", "status": "'pending'", "decided_by": "'U0MGR00001'",
		"decided_at": "decided_at + 1", "created_at": "created_at - 1", "key_id": "'other'", "mac": "'" + strings.Repeat("4", 64) + "'",
	})
	add("decisions", byRun, true, map[string]string{
		"approver_id": "'U0MGR00001'", "approver_name": "'Someone'", "role": "'manager'",
		"verdict": "'reject'", "reason": "'looks fine'", "edited_args": "?", "via": "'api'", "payload_digest": "'ab'",
		"at": "at - 1", "key_id": "'other'", "mac": "'" + strings.Repeat("5", 64) + "'",
	})
	n := len(cases)
	add("operations", byRun, true, map[string]string{
		"idx": "idx + 1", "action": "'other'", "args_digest": "'" + strings.Repeat("6", 64) + "'", "status": "'committed'",
		"attempts": "attempts + 1", "receipt": "?", "error": "'x'", "created_at": "created_at - 1", "updated_at": "updated_at + 1",
		"key_id": "'other'", "mac": "'" + strings.Repeat("7", 64) + "'",
	})
	for i := n; i < len(cases); i++ {
		cases[i].retried = true
	}
	// A transition's events: a row of audit each on PostgreSQL; in the
	// row of the checkpoint the transition wrote on SQLite, whose run and
	// checkpoint they take from it.
	n = len(cases)
	add("audit", byRun+" AND action = 'decided'", true, map[string]string{
		"actor": "'U0MGR00001'", "action": "'approved'", "detail": "?", "at": "at + 1", "prev_hash": "'" + strings.Repeat("8", 64) + "'",
		"hash": "'" + strings.Repeat("9", 64) + "'", "checkpoint_seq": "checkpoint_seq + 1", "checkpoint_hash": "'" + strings.Repeat("a", 64) + "'",
		"key_id": "'other'", "mac": "'" + strings.Repeat("b", 64) + "'",
	})
	for i := n; i < len(cases); i++ {
		cases[i].driver = "postgres"
	}
	for field, change := range map[string]func(e *record.AuditEvent){
		"actor":     func(e *record.AuditEvent) { e.Actor = "U0MGR00001" },
		"action":    func(e *record.AuditEvent) { e.Action = "approved" },
		"detail":    func(e *record.AuditEvent) { e.Detail = []byte(`{"verdict":"approve","by":"U0MGR00001"}`) },
		"at":        func(e *record.AuditEvent) { e.At = e.At.Add(time.Millisecond) },
		"prev_hash": func(e *record.AuditEvent) { e.PrevHash = strings.Repeat("8", 64) },
		"hash":      func(e *record.AuditEvent) { e.Hash = strings.Repeat("9", 64) },
		"seq":       func(e *record.AuditEvent) { e.Seq += 1000 },
		"key_id":    func(e *record.AuditEvent) { e.KeyID = "other" },
		"mac":       func(e *record.AuditEvent) { e.MAC = strings.Repeat("b", 64) },
	} {
		cases = append(cases, tamperCase{table: "checkpoints", column: "events." + field, event: change, driver: "sqlite",
			rehash: field != "hash" && field != "prev_hash"})
	}
	// The row's events as bytes, and the seq that finds them.
	cases = append(cases,
		tamperCase{table: "checkpoints", column: "events", set: "x'00'", where: byRun + " AND last_event_seq > 0 AND seq = 2", driver: "sqlite"},
		tamperCase{table: "checkpoints", column: "last_event_seq", set: "last_event_seq + 1000", where: byRun + " AND last_event_seq > 0 AND seq = 2", driver: "sqlite"})
	// Each run's audit head is sealed: moved back to an earlier event (as
	// when the newest are deleted) or changed, it no longer matches its seal.
	// PostgreSQL keeps it in audit_heads, SQLite in the run's row.
	n = len(cases)
	add("audit_heads", byRun, false, map[string]string{
		"seq": "seq - 1", "hash": "'" + strings.Repeat("f", 64) + "'", "key_id": "'other'", "mac": "'" + strings.Repeat("0", 63) + "1'",
	})
	for i := n; i < len(cases); i++ {
		cases[i].driver = "postgres"
	}
	n = len(cases)
	add("runs", "id = ?", false, map[string]string{
		"audit_seq": "audit_seq - 1", "audit_hash": "'" + strings.Repeat("f", 64) + "'", "audit_key_id": "'other'",
		"audit_mac": "'" + strings.Repeat("0", 63) + "1'",
	})
	for i := n; i < len(cases); i++ {
		cases[i].driver = "sqlite"
	}
	// The run row is not sealed: what in it decides anything is checked
	// against the sealed checkpoint (status, seq, fingerprint, who asked,
	// which agent, the task, where events go). Its other columns are
	// bookkeeping (leases, timestamps).
	add("runs", "id = ?", false, map[string]string{
		"status": "'waiting_approval'", "seq": "seq - 1", "fingerprint": "'" + strings.Repeat("e", 64) + "'",
		"callback_url": "'" + evilCallback + "'", "requester_id": "'agent:other'", "workflow": "'resolver'", "task_id": "'T-2'",
	})
	// The head has no run: its condition takes the run id only to use it.
	add("integrity_head", "id = 1 AND ? <> ''", false, map[string]string{
		"keyed_since": "keyed_since + 86400000", "seq": "seq - 1", "hash": "'" + strings.Repeat("c", 64) + "'",
		"key_id": "'other'", "mac": "'" + strings.Repeat("d", 64) + "'",
	})
	// The callback URL changed in the sealed state (and in the row, so that
	// the two agree), every hash recomputed: only the seal can tell.
	cases = append(cases, tamperCase{table: "checkpoints", column: "state", where: byRun + " AND seq = 2", rehash: true, arg: "callback_url"})
	// The evidence, stored once in the base the later checkpoints are
	// written against, changed there, every hash recomputed.
	cases = append(cases, tamperCase{table: "checkpoints", column: "state", where: byRun + " AND seq = 1", rehash: true, arg: "evidence"})
	// The intent, kept in the checkpoint that recorded it, said to have
	// its receipt already, every hash recomputed.
	cases = append(cases, tamperCase{table: "checkpoints", column: "state", where: byRun + " AND seq = 3", rehash: true, arg: "operations"})
	for i := range cases {
		c := &cases[i]
		switch c.column {
		case "state":
			c.set, c.rehash = "?", true
			if c.arg == "callback_url" {
				c.also = `UPDATE runs SET callback_url = '` + evilCallback + `' WHERE id = ?`
			}
		case "edited_args":
			c.arg = []byte(`[{"index":0,"args":{"payment_id":"PAY-1","amount":1}}]`)
		case "receipt":
			c.arg = []byte(`{"id":"RF-FORGED"}`)
		case "detail":
			c.arg = []byte(`{"verdict":"approve","by":"U0MGR00001"}`)
		}
	}
	return cases
}

// TestTamperingIsCaught is the tampering suite: for each sealed table, each
// column of one row of a run that was approved and whose intent was recorded
// (nothing sent yet; for an operation's row, whose first attempt failed and
// waits for its retry) is changed behind the engine's back, with every
// unkeyed hash recomputed the way an attacker would. Verify fails naming the
// run or the audit event, and the run never executes: resuming it hands it
// to a person and the target is not called again.
func TestTamperingIsCaught(t *testing.T) {
	for _, driver := range []struct {
		name string
		env  func(t *testing.T, opts ...harnessOption) *tamperEnv
	}{{"sqlite", sqliteTamperEnv}, {"postgres", postgresTamperEnv}} {
		t.Run(driver.name, func(t *testing.T) {
			for _, tc := range tamperCases() {
				if tc.driver != "" && tc.driver != driver.name {
					continue // the column is not in this store's layout
				}
				t.Run(tc.name(), func(t *testing.T) {
					t.Parallel()
					if driver.name == "postgres" {
						pgtest.DSN(t)
					}
					at := "after-intent"
					if tc.retried {
						at = "after-park"
					}
					env := driver.env(t, crashAt(at), allowCallbacks)
					if tc.retried {
						env.h.target.failNext = []error{workflow.Transient(errors.New("the ledger is busy"))}
					}
					p := refund("PAY-1", 119)
					p.CallbackURL = goodCallback
					run := env.h.submit(p)
					if !survive(t, func() { _, _ = env.h.approve(run.ID, "U0LEAD0001") }) {
						t.Fatalf("failpoint %s never fired", at)
					}
					calls := env.h.target.calls
					env.reopen()
					if rep, err := env.h.engine.Verify(ctx); err != nil || !rep.OK() || !rep.Keyed || rep.Unkeyed != 0 {
						t.Fatalf("before tampering: %+v %v", rep, err)
					}
					env.tamper(t, run.ID, tc)
					env.reopen()

					rep, err := env.h.engine.Verify(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if rep.OK() {
						t.Fatalf("verify passed after %s.%s was changed", tc.table, tc.column)
					}
					// A head naming a key not given is reported as that, not as
					// damage of every row.
					named := strings.Contains(rep.AuditProblem, "event") || strings.Contains(rep.AuditProblem, "head") || rep.KeyNotGiven == "other"
					for _, d := range rep.Damaged {
						named = named || d.RunID == run.ID
					}
					if !named {
						t.Fatalf("verify does not name the run or the event: %+v", rep)
					}
					// Resume may report the damage as an error; what counts is
					// where the run is and that nothing was sent.
					_, _ = env.h.engine.Resume(ctx, run.ID)
					if v := env.h.get(run.ID); v.Status != record.StatusNeedsAttention {
						t.Fatalf("after resume the run is %s (%s), want needs_attention", v.Status, v.Reason)
					}
					if n := env.h.target.calls; n != calls || len(env.h.target.Effects()) != 0 {
						t.Fatalf("the target was called %d times (%d before tampering): %v", n, calls, env.h.target.Effects())
					}
				})
			}
		})
	}
}

// checkpoints are runID's checkpoints as the store reads them.
func (env *tamperEnv) checkpoints(t *testing.T, runID string) []*record.Checkpoint {
	t.Helper()
	var cps []*record.Checkpoint
	if err := env.h.engine.Store().View(ctx, func(ctx context.Context, tx storage.Tx) error {
		var err error
		cps, err = tx.Checkpoints(ctx, runID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return cps
}

// editStates writes each state of runID's checkpoints that still have one
// as edit changes it, behind the engine's back: as the store reads it (a
// state is stored compressed), written back as it is, which the store
// reads as well.
func (env *tamperEnv) editStates(t *testing.T, runID string, edit func(state []byte) []byte) {
	t.Helper()
	cps := env.checkpoints(t, runID)
	changed := 0
	for _, c := range cps {
		if c.State == nil {
			continue
		}
		if s := edit(c.State); !bytes.Equal(s, c.State) {
			env.exec(`UPDATE checkpoints SET state = ? WHERE run_id = ? AND seq = ?`, s, runID, c.Seq)
			changed++
		}
	}
	if changed == 0 {
		t.Fatalf("no state of run %s was changed", runID)
	}
}

// tamper applies tc to the run's row and recomputes the unkeyed hashes.
func (env *tamperEnv) tamper(t *testing.T, runID string, tc tamperCase) {
	t.Helper()
	if tc.event != nil {
		env.events(func(e *record.AuditEvent) bool {
			if e.RunID == runID && e.Action == record.EventDecided {
				tc.event(e)
			}
			return true
		})
		if tc.rehash {
			env.rehash(t, runID)
		}
		return
	}
	set := tc.set
	args := []any{}
	if strings.Contains(set, "?") {
		arg := tc.arg
		if tc.column == "state" {
			arg = forgedState(t, env, runID, tc.arg)
		}
		args = append(args, arg)
	}
	args = append(args, runID)
	env.exec(`UPDATE `+tc.table+` SET `+tc.column+` = `+set+` WHERE `+tc.where, args...)
	if tc.also != "" {
		env.exec(tc.also, runID)
	}
	if tc.rehash {
		env.rehash(t, runID)
	}
}

// forgedState is the run's second checkpoint with its summary changed, or
// with field (a string) pointed at evilCallback; for "evidence", the run's
// first checkpoint with other evidence; for "operations", its third (the
// intent's) with the intent turned into a receipt.
func forgedState(t *testing.T, env *tamperEnv, runID string, field any) []byte {
	cps := env.checkpoints(t, runID)
	c := cps[1]
	switch field {
	case "evidence":
		c = cps[0]
	case "operations":
		c = cps[2]
	}
	var st map[string]any
	if err := json.Unmarshal(c.State, &st); err != nil {
		t.Fatal(err)
	}
	switch f, ok := field.(string); {
	case f == "evidence":
		st[f] = []any{map[string]any{"source": "get_payments", "data": map[string]any{"payments": []any{map[string]any{"id": "PAY-1", "status": "disputed"}}}}}
	case f == "operations":
		op := st[f].([]any)[0].(map[string]any)
		if op["intended"] == nil {
			t.Fatalf("checkpoint %d holds no intent: %v", c.Seq, op)
		}
		op["status"], op["receipt"] = "committed", map[string]any{"id": "RF-FORGED"}
		delete(op, "intended")
	case ok:
		st[f] = evilCallback
	default:
		st["summary"] = "forged"
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rehash recomputes the run's checkpoint chain and every audit chain (the
// run's heads with them), as an attacker who can write the database can:
// only a key can stop them.
func (env *tamperEnv) rehash(t *testing.T, runID string) {
	t.Helper()
	cps := env.checkpoints(t, runID)
	prev := ""
	newHash := map[string]string{}
	for _, c := range cps {
		old := c.Hash
		c.PrevHash = prev
		c.Hash = record.CheckpointHash(c)
		newHash[old] = c.Hash
		env.exec(`UPDATE checkpoints SET prev_hash = ?, hash = ? WHERE run_id = ? AND seq = ?`, c.PrevHash, c.Hash, c.RunID, c.Seq)
		prev = c.Hash
	}
	last := map[string]*record.AuditEvent{} // per run
	env.events(func(ev *record.AuditEvent) bool {
		if h, ok := newHash[ev.CheckpointHash]; ok {
			ev.CheckpointHash = h
		}
		ev.PrevHash = ""
		if p, ok := last[ev.RunID]; ok {
			ev.PrevHash = p.Hash
		}
		ev.Hash = record.AuditHash(ev)
		e := *ev
		last[ev.RunID] = &e
		return true
	})
	for run, ev := range last {
		// Wherever the store keeps the run's head: its row, or audit_heads.
		env.exec(`UPDATE runs SET audit_seq = ?, audit_hash = ? WHERE id = ? AND audit_seq > 0`, ev.Seq, ev.Hash, run)
		env.exec(`UPDATE audit_heads SET seq = ?, hash = ? WHERE run_id = ?`, ev.Seq, ev.Hash, run)
	}
}

// TestDeletingTheNewestAuditEventsIsCaught: the last k audit events go, on
// both drivers; verify says events were deleted.
func TestDeletingTheNewestAuditEventsIsCaught(t *testing.T) {
	for _, driver := range []struct {
		name string
		env  func(t *testing.T, opts ...harnessOption) *tamperEnv
	}{{"sqlite", sqliteTamperEnv}, {"postgres", postgresTamperEnv}} {
		for _, k := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%s/last_%d", driver.name, k), func(t *testing.T) {
				env := driver.env(t)
				run := env.h.submit(refund("PAY-1", 119))
				if _, err := env.h.approve(run.ID, "U0LEAD0001"); err != nil {
					t.Fatal(err)
				}
				env.h.submit(refund("PAY-2", 5)) // another run after it
				rep, err := env.h.engine.Verify(ctx)
				if err != nil || !rep.OK() {
					t.Fatalf("before: %+v %v", rep, err)
				}
				// By seq, which need not count from 1 without gaps.
				var seqs []int64
				env.events(func(e *record.AuditEvent) bool { seqs = append(seqs, e.Seq); return true })
				newest := seqs[max(0, len(seqs)-k):]
				env.events(func(e *record.AuditEvent) bool { return !slices.Contains(newest, e.Seq) })
				rep, err = env.h.engine.Verify(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK() || !strings.Contains(rep.AuditProblem+fmt.Sprint(rep.Damaged), "deleted") && !strings.Contains(fmt.Sprint(rep.Damaged), "no audit event") {
					t.Fatalf("deleting the last %d events went unnoticed: %+v", k, rep)
				}
			})
		}
	}
}

// TestKeysRotate: rows sealed under an old key verify while that key is kept
// below the new one. Dropping it while the store's head is still sealed with
// it checks no seal and names the key not given; once an anchor sealed the
// head with the new key, dropping the old one makes its rows fail, naming it.
func TestKeysRotate(t *testing.T) {
	oldLine, _ := keyring.NewLine("old")
	newLine, _ := keyring.NewLine("new")
	ring := func(text string) *keyring.Ring {
		k, err := keyring.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	h := newHarness(t, withKeys(ring(oldLine)))
	first := h.submit(refund("PAY-1", 119))
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(ring(newLine+"\n"+oldLine)))
	if got, err := h.approve(first.ID, "U0LEAD0001"); err != nil || got.Status != record.StatusDone {
		t.Fatalf("approve across a rotation: %v %v", got, err)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify with both keys: %+v %v", rep, err)
	}
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(ring(newLine)))
	rep, err := h.engine.Verify(ctx)
	if err != nil || rep.OK() || rep.KeyNotGiven != "old" || !rep.Unverified || len(rep.Damaged) != 0 || rep.AuditProblem != "" {
		t.Fatalf("verify without the key of the store's head: %+v %v", rep, err)
	}
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(ring(newLine+"\n"+oldLine)))
	if _, err := h.engine.Anchor(ctx); err != nil {
		t.Fatal(err)
	}
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(ring(newLine)))
	rep, err = h.engine.Verify(ctx)
	if err != nil || rep.OK() || rep.KeyNotGiven != "" || !strings.Contains(rep.AuditProblem+fmt.Sprint(rep.Damaged), "key old, which is not among the configured keys") {
		t.Fatalf("verify without the old key: %+v %v", rep, err)
	}
}

// TestUnkeyedStoreKeepsVerifying: a store written before keys verifies as
// unkeyed; once keys are configured, its old rows stay acceptable, a run
// that waited from before can still be approved, and everything written
// from then on is sealed.
func TestUnkeyedStoreKeepsVerifying(t *testing.T) {
	h := newHarness(t)
	old := h.submit(refund("PAY-1", 119))
	rep, err := h.engine.Verify(ctx)
	if err != nil || !rep.OK() || rep.Keyed || rep.Unkeyed == 0 || !rep.Unverified {
		t.Fatalf("an unkeyed store, no keys: %+v %v", rep, err)
	}
	h.clock.Advance(time.Minute)
	h.open(testPolicy(t, "rev-1", h.roles), withKeys(testKeys(t)))
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() || rep.Keyed || rep.Unverified {
		t.Fatalf("an unkeyed store, with keys: %+v %v", rep, err)
	}
	if got, err := h.approve(old.ID, "U0LEAD0001"); err != nil || got.Status != record.StatusDone {
		t.Fatalf("approve a run from before the keys: %v %v", got, err)
	}
	h.submit(refund("PAY-2", 5))
	rep, err = h.engine.Verify(ctx)
	if err != nil || !rep.OK() || !rep.Keyed || rep.Unkeyed == 0 {
		t.Fatalf("after keyed writes: %+v %v", rep, err)
	}
	// A row written after keying with its seal stripped is damage, not "old".
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE checkpoints SET key_id = '', mac = '' WHERE run_id = ? AND seq = (SELECT MAX(seq) FROM checkpoints WHERE run_id = ?)`, old.ID, old.ID); err != nil {
		t.Fatal(err)
	}
	rep, err = h.engine.Verify(ctx)
	if err != nil || rep.OK() || !strings.Contains(fmt.Sprint(rep.Damaged), "not sealed, though written") {
		t.Fatalf("a stripped seal: %+v %v", rep, err)
	}
}

// TestAnchorIsWhatVerifyPrints: with keys or without, an anchor written
// after some runs is the head verify prints; a later one, after more runs,
// chains to it, and both verify as anchors given on the command line.
func TestAnchorIsWhatVerifyPrints(t *testing.T) {
	for _, opts := range [][]harnessOption{nil, {withKeys(testKeys(t))}} {
		h := newHarness(t, opts...)
		if a, err := h.engine.Anchor(ctx); err != nil || a != (workflow.Anchor{}) {
			t.Fatalf("keys %v: an anchor of an empty store: %v %v", opts != nil, a, err)
		}
		h.submit(refund("PAY-1", 119))
		first, err := h.engine.Anchor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := h.engine.Anchor(ctx); err != nil || again != first {
			t.Fatalf("keys %v: nothing moved, yet a new anchor %v (first %v): %v", opts != nil, again, first, err)
		}
		h.submit(refund("PAY-2", 5))
		a, err := h.engine.Anchor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := h.engine.Verify(ctx, first, a)
		if err != nil || !rep.OK() || a.Seq != first.Seq+1 || a != rep.Head || rep.Anchors != 2 {
			t.Fatalf("keys %v: anchors %v then %v, verify %+v %v", opts != nil, first, a, rep, err)
		}
		parsed, err := workflow.ParseAnchor(a.String())
		if err != nil || parsed != a {
			t.Fatalf("keys %v: %s parses as %v %v", opts != nil, a, parsed, err)
		}
	}
}

// TestADamagedHeadIsNotSealedAgain: someone moves the store's keyed-since
// time later (so that rows they strip of their seals would pass as older);
// a new process that then writes must not seal their value into a valid
// head: verify still reports the head.
func TestADamagedHeadIsNotSealedAgain(t *testing.T) {
	env := sqliteTamperEnv(t)
	env.h.submit(refund("PAY-1", 119))
	env.exec(`UPDATE integrity_head SET keyed_since = keyed_since + 86400000 WHERE id = 1`)
	env.reopen()
	_, _ = env.h.engine.Submit(ctx, refund("PAY-2", 5)) // writes audit events
	rep, err := env.h.engine.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(rep.AuditProblem, "integrity head") {
		t.Fatalf("the moved keyed-since time was sealed again: %+v", rep)
	}
}

// TestPruneMarkersCannotHideTampering: a pruned checkpoint is accepted only
// below the sealed summary a prune writes for an ended run. An attacker who
// removes a state and marks it pruned (on a waiting run, even with its row
// set to done and pruned; or on an ended run never pruned) is caught, and the
// waiting run never executes; on a pruned run, a changed decision or a forged
// summary is still caught by the seals.
func TestPruneMarkersCannotHideTampering(t *testing.T) {
	cases := []struct {
		name   string
		target func(s seeded) string
		sql    []string
		rehash bool
	}{
		{"a waiting run's state removed and marked pruned", func(s seeded) string { return s.waiting[0] },
			[]string{`UPDATE checkpoints SET state = NULL, pruned_at = 1 WHERE run_id = ? AND seq = 1`}, false},
		{"the same, with its row said done and pruned", func(s seeded) string { return s.waiting[0] },
			[]string{`UPDATE checkpoints SET state = NULL, pruned_at = 1 WHERE run_id = ? AND seq = 1`,
				`UPDATE runs SET status = 'done', pruned_at = 1 WHERE id = ?`}, false},
		{"an ended run never pruned, its first state removed", func(s seeded) string { return s.done[len(s.done)-1] },
			[]string{`UPDATE checkpoints SET state = NULL, pruned_at = 1 WHERE run_id = ? AND seq = 1`}, false},
		{"a pruned run's decision changed", func(s seeded) string { return s.rejected[0] },
			[]string{`UPDATE decisions SET reason = 'looks fine' WHERE run_id = ?`}, false},
		{"a pruned run's summary forged and the chains rehashed", func(s seeded) string { return s.rejected[0] }, nil, true},
	}
	forge := func(state []byte) []byte { return bytes.ReplaceAll(state, []byte("not this one"), []byte("approved")) }
	for _, driver := range []struct {
		name string
		env  func(t *testing.T, opts ...harnessOption) *tamperEnv
	}{{"sqlite", sqliteTamperEnv}, {"postgres", postgresTamperEnv}} {
		for _, tc := range cases {
			t.Run(driver.name+"/"+tc.name, func(t *testing.T) {
				if driver.name == "postgres" {
					pgtest.DSN(t)
				}
				env := driver.env(t)
				h := env.h
				seed := seedRuns(t, h, 3, 0)
				h.clock.Advance(retention + time.Hour)
				if _, err := h.engine.Prune(ctx, workflow.PruneOptions{Before: h.clock.Now().Add(-retention)}); err != nil {
					t.Fatal(err)
				}
				late := seedRuns(t, h, 1, 1) // ended after the cutoff, and one waiting
				seed.waiting, seed.done = late.waiting, late.done
				if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
					t.Fatalf("before tampering: %+v %v", rep, err)
				}
				id := tc.target(seed)
				calls := h.target.calls
				for _, q := range tc.sql {
					env.exec(q, id)
				}
				if tc.sql == nil {
					env.editStates(t, id, forge)
				}
				if tc.rehash {
					env.rehash(t, id)
				}
				env.reopen()
				rep, err := env.h.engine.Verify(ctx)
				if err != nil {
					t.Fatal(err)
				}
				named := false
				for _, d := range rep.Damaged {
					named = named || d.RunID == id
				}
				if rep.OK() || !named {
					t.Fatalf("verify after %s: %+v", tc.name, rep)
				}
				if id == seed.waiting[0] {
					_, _ = env.h.approve(id, "U0LEAD0001")
					if v := env.h.get(id); v.Status != record.StatusNeedsAttention && v.Problem == "" {
						t.Fatalf("after an approval the tampered run is %s (%s) and shows no problem", v.Status, v.Reason)
					}
					if n := env.h.target.calls - calls; n != 0 {
						t.Fatalf("the target was called %d times after the tampering", n)
					}
				}
			})
		}
	}
}

// TestTheHeadOfEventsAboutNoRunIsSealed: the events about no run (a
// delegation) have their head in audit_heads on both drivers; each of its
// columns changed behind the engine's back fails verify.
func TestTheHeadOfEventsAboutNoRunIsSealed(t *testing.T) {
	for _, driver := range []struct {
		name string
		env  func(t *testing.T, opts ...harnessOption) *tamperEnv
	}{{"sqlite", sqliteTamperEnv}, {"postgres", postgresTamperEnv}} {
		for col, set := range map[string]string{
			"seq": "seq + 1", "hash": "'" + strings.Repeat("f", 64) + "'", "key_id": "'other'", "mac": "'" + strings.Repeat("0", 63) + "1'",
		} {
			t.Run(driver.name+"/audit_heads."+col, func(t *testing.T) {
				t.Parallel()
				if driver.name == "postgres" {
					pgtest.DSN(t)
				}
				env := driver.env(t)
				env.h.delegate("U0MGR00001", "U0LEAD0002", 24*time.Hour)
				if rep, err := env.h.engine.Verify(ctx); err != nil || !rep.OK() {
					t.Fatalf("before: %+v %v", rep, err)
				}
				env.exec(`UPDATE audit_heads SET ` + col + ` = ` + set + ` WHERE run_id = ''`)
				rep, err := env.h.engine.Verify(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK() {
					t.Fatalf("verify passed after audit_heads.%s of the events about no run was changed", col)
				}
			})
		}
	}
}
