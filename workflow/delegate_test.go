package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// deputyID holds no role: only a delegation lets them decide.
const deputyID = "U0DEPUTY01"

func (h *harness) delegate(from, to string, d time.Duration) *record.Delegation {
	h.t.Helper()
	dl, err := h.engine.Delegate(context.Background(), record.Delegation{From: from, To: to, Until: h.clock.Now().Add(d), Reason: "on leave"})
	if err != nil {
		h.t.Fatalf("delegate %s to %s: %v", from, to, err)
	}
	return dl
}

// A delegate decides what their delegator may, as the delegator: the
// decision, the checkpoint, the view and the audit event say on whose
// behalf; the role is the delegator's.
func TestDelegateDecidesOnBehalfOfTheDelegator(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	if err := h.decideAs(run.ID, deputyID); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("before the delegation: %v, want no_role", err)
	}
	h.delegate("U0LEAD0001", deputyID, 24*time.Hour)
	if err := h.decideAs(run.ID, deputyID); err != nil {
		t.Fatalf("the delegate: %v", err)
	}
	v := h.get(run.ID)
	if v.Status != record.StatusExecuting || len(v.Decisions) != 1 {
		t.Fatalf("status %s, decisions %+v", v.Status, v.Decisions)
	}
	if d := v.Decisions[0]; d.By != deputyID || d.OnBehalfOf != "U0LEAD0001" || d.Role != "team_lead" {
		t.Fatalf("decision %+v, want by %s on behalf of U0LEAD0001 as team_lead", d, deputyID)
	}
	b, _ := json.Marshal(v.Decisions[0])
	if !strings.Contains(string(b), `"on_behalf_of":"U0LEAD0001"`) {
		t.Fatalf("decision JSON %s lacks on_behalf_of", b)
	}
	evs, err := h.engine.AuditLog(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var detail map[string]string
	for _, e := range evs {
		if e.Action == record.EventDecided {
			_ = json.Unmarshal(e.Detail, &detail)
		}
	}
	if detail["on_behalf_of"] != "U0LEAD0001" {
		t.Fatalf("decided event detail %v, want on_behalf_of", detail)
	}
	if n, err := h.engine.Verify(ctx); err != nil || !n.OK() {
		t.Fatalf("verify %+v %v", n, err)
	}
}

// The quorum counts a delegate's vote as the delegator's: the delegator,
// or a second delegate of theirs, then voting is already_voted; someone
// else completes it.
func TestDelegateVoteCountsAsTheDelegator(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "team_lead", 2))
	h.delegate("U0LEAD0001", deputyID, 24*time.Hour)
	h.delegate("U0LEAD0001", outsider, 24*time.Hour)
	run := h.submit(refund("PAY-1", 119))
	if err := h.decideAs(run.ID, deputyID); err != nil {
		t.Fatalf("the delegate: %v", err)
	}
	if err := h.decideAs(run.ID, "U0LEAD0001"); !record.IsRefused(err, record.CodeAlreadyVoted) {
		t.Fatalf("the delegator after their delegate: %v, want already_voted", err)
	}
	if err := h.decideAs(run.ID, outsider); !record.IsRefused(err, record.CodeAlreadyVoted) {
		t.Fatalf("a second delegate of the same delegator: %v, want already_voted", err)
	}
	if v := h.get(run.ID); v.Status != record.StatusWaitingApproval {
		t.Fatalf("status %s after one person's vote, want waiting", v.Status)
	}
	if err := h.decideAs(run.ID, "U0LEAD0002"); err != nil {
		t.Fatalf("a second team lead: %v", err)
	}
	if v := h.get(run.ID); v.Status != record.StatusExecuting {
		t.Fatalf("status %s after two people's votes, want executing", v.Status)
	}

	// The other way round: the delegator first, then their delegate.
	h = newHarness(t)
	h.open(escalatePolicy(t, h.roles, "team_lead", 2))
	h.delegate("U0LEAD0001", deputyID, 24*time.Hour)
	run = h.submit(refund("PAY-1", 119))
	if err := h.decideAs(run.ID, "U0LEAD0001"); err != nil {
		t.Fatal(err)
	}
	if err := h.decideAs(run.ID, deputyID); !record.IsRefused(err, record.CodeAlreadyVoted) {
		t.Fatalf("the delegate after their delegator: %v, want already_voted", err)
	}
}

// A delegation that ended or was revoked lets nobody in; one that is
// revoked cannot be revoked again.
func TestEndedOrRevokedDelegationIsNoRole(t *testing.T) {
	h := newHarness(t)
	run := h.submit(refund("PAY-1", 119))
	h.delegate("U0LEAD0001", deputyID, time.Hour)
	h.clock.Advance(time.Hour)
	if err := h.decideAs(run.ID, deputyID); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("after the delegation ended: %v, want no_role", err)
	}
	d := h.delegate("U0LEAD0001", deputyID, time.Hour)
	if _, err := h.engine.RevokeDelegation(ctx, d.ID, outsider); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("revoked by a stranger: %v, want no_role", err)
	}
	if _, err := h.engine.RevokeDelegation(ctx, d.ID, "U0LEAD0001"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := h.engine.RevokeDelegation(ctx, d.ID, "U0LEAD0001"); !record.IsRefused(err, record.CodeInvalidInput) {
		t.Fatalf("revoked twice: %v, want invalid_input", err)
	}
	if err := h.decideAs(run.ID, deputyID); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("after the delegation was revoked: %v, want no_role", err)
	}
	active, err := h.engine.Delegations(ctx, deputyID, false)
	if err != nil || len(active) != 0 {
		t.Fatalf("active delegations %v, %v; want none", active, err)
	}
	all, err := h.engine.Delegations(ctx, deputyID, true)
	if err != nil || len(all) != 2 || all[1].RevokedBy != "U0LEAD0001" {
		t.Fatalf("all delegations %+v, %v; want two, the second revoked", all, err)
	}
}

// A delegation never lets anyone approve their own request: neither the
// delegate's nor the delegator's, even where the rule allows self-approval.
func TestDelegationNeverApprovesOwnRequest(t *testing.T) {
	for _, tc := range []struct {
		name, requester, from, to string
	}{
		{"the delegator's request", "U0LEAD0001", "U0LEAD0001", deputyID},
		{"the delegate's request", deputyID, "U0LEAD0001", deputyID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *workflow.Config) { c.AllowUnknownRequesters = true })
			p := refund("PAY-1", 119)
			p.Requester = record.Person{ID: tc.requester}
			run := h.submit(p)
			h.delegate(tc.from, tc.to, time.Hour)
			if err := h.decideAs(run.ID, tc.to); !record.IsRefused(err, record.CodeSelfApproval) {
				t.Fatalf("%v, want self_approval", err)
			}
			if v := h.get(run.ID); len(v.Decisions) != 0 {
				t.Fatalf("decisions %+v", v.Decisions)
			}
		})
	}
}

// A delegate may only what the delegator may: a team lead's delegate
// cannot approve what needs a manager. Someone who may decide in their own
// right decides as themselves.
func TestDelegateMayOnlyWhatTheDelegatorMay(t *testing.T) {
	h := newHarness(t)
	h.open(escalatePolicy(t, h.roles, "manager", 1))
	run := h.submit(refund("PAY-1", 119))
	h.delegate("U0LEAD0001", deputyID, time.Hour)
	if err := h.decideAs(run.ID, deputyID); !record.IsRefused(err, record.CodeNoRole) {
		t.Fatalf("a team lead's delegate on a manager's request: %v, want no_role", err)
	}
	h.delegate("U0LEAD0002", "U0MGR00001", time.Hour)
	if err := h.decideAs(run.ID, "U0MGR00001"); err != nil {
		t.Fatal(err)
	}
	if d := h.get(run.ID).Decisions[0]; d.OnBehalfOf != "" || d.Role != "manager" {
		t.Fatalf("a manager who is also a delegate: %+v, want their own decision", d)
	}
}

// A delegation is refused when it is to oneself, from someone without a
// role, to someone unknown, already over, too long, or malformed; nothing
// is stored.
func TestDelegationIsValidated(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	for _, tc := range []struct {
		name string
		d    record.Delegation
		code string
	}{
		{"to oneself", record.Delegation{From: "U0LEAD0001", To: "U0LEAD0001", Until: now.Add(time.Hour)}, record.CodeInvalidInput},
		{"from no role", record.Delegation{From: "U0NOBODY01", To: deputyID, Until: now.Add(time.Hour)}, record.CodeNoRole},
		{"to someone unknown", record.Delegation{From: "U0LEAD0001", To: "bob", Until: now.Add(time.Hour)}, record.CodeInvalidInput},
		{"in the past", record.Delegation{From: "U0LEAD0001", To: deputyID, Until: now}, record.CodeInvalidInput},
		{"over 90 days", record.Delegation{From: "U0LEAD0001", To: deputyID, Until: now.Add(90*24*time.Hour + time.Second)}, record.CodeInvalidInput},
		{"no end", record.Delegation{From: "U0LEAD0001", To: deputyID}, record.CodeInvalidInput},
		{"a reason of two lines", record.Delegation{From: "U0LEAD0001", To: deputyID, Until: now.Add(time.Hour), Reason: "a\nb"}, record.CodeInvalidInput},
		{"a NUL", record.Delegation{From: "U0LEAD0001", To: deputyID + "\x00", Until: now.Add(time.Hour)}, record.CodeInvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.engine.Delegate(ctx, tc.d)
			wantRefused(t, err, tc.code)
		})
	}
	if all, err := h.engine.Delegations(ctx, "", true); err != nil || len(all) != 0 {
		t.Fatalf("stored %v, %v", all, err)
	}
	// A person of the config may be delegated to, and 90 days is allowed.
	if _, err := h.engine.Delegate(ctx, record.Delegation{From: "U0MGR00001", To: "agent:resolver", Until: now.Add(90 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// A delegation row edited in the store lets nobody in: moving its end,
// its delegate or undoing its revocation breaks its seal.
func TestTamperedDelegationLetsNobodyIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revoke bool
		sql    string
	}{
		{"end moved later", false, `UPDATE delegations SET until_at = until_at + 86400000`},
		{"delegate changed", false, `UPDATE delegations SET to_id = 'U0OUT00001'`},
		{"revocation undone", true, `UPDATE delegations SET revoked_at = 0, revoked_by = ''`},
	} {
		for driver, newEnv := range map[string]func(*testing.T, ...harnessOption) *tamperEnv{"sqlite": sqliteTamperEnv, "postgres": postgresTamperEnv} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				env := newEnv(t)
				h := env.h
				run := h.submit(refund("PAY-1", 119))
				d := h.delegate("U0LEAD0001", deputyID, time.Hour)
				if tc.revoke {
					if _, err := h.engine.RevokeDelegation(ctx, d.ID, "U0LEAD0001"); err != nil {
						t.Fatal(err)
					}
				} else {
					h.clock.Advance(time.Hour) // over, unless the row is edited
				}
				env.exec(tc.sql)
				env.reopen()
				for _, who := range []string{deputyID, outsider} {
					if err := h.decideAs(run.ID, who); !record.IsRefused(err, record.CodeNoRole) {
						t.Fatalf("%s after the row was edited: %v, want no_role", who, err)
					}
				}
				if _, err := h.engine.Delegations(ctx, "", true); err == nil || !strings.Contains(err.Error(), "delegation "+d.ID) {
					t.Fatalf("listing an edited delegation: %v, want its integrity problem", err)
				}
				if rep, err := h.engine.Verify(ctx); err != nil || rep.OK() || !strings.Contains(fmt.Sprint(rep.Damaged), "delegation "+d.ID) {
					t.Fatalf("verify after the row was edited: %+v, %v", rep, err)
				}
			})
		}
	}
}

// A decision's on_behalf_of is sealed with it: clearing it in the store,
// so that the vote reads as the delegate's own, is damage.
func TestTamperedOnBehalfOfIsDamage(t *testing.T) {
	env := sqliteTamperEnv(t)
	h := env.h
	run := h.submit(refund("PAY-1", 119))
	h.delegate("U0LEAD0001", deputyID, time.Hour)
	if err := h.decideAs(run.ID, deputyID); err != nil {
		t.Fatal(err)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify before: %+v, %v", rep, err)
	}
	env.exec(`UPDATE decisions SET on_behalf_of = ''`)
	env.reopen()
	if rep, err := h.engine.Verify(ctx); err != nil || rep.OK() || !strings.Contains(fmt.Sprint(rep.Damaged), "decision") {
		t.Fatalf("verify after on_behalf_of was cleared: %+v, %v", rep, err)
	}
}

// A delegate fills a place of a composite approval as their delegator
// would, with the delegator's role, and only a place still open.
func TestDelegateFillsACompositePlaceAsTheDelegator(t *testing.T) {
	t.Run("the delegator's place", func(t *testing.T) {
		h := compositeHarness(t)
		run := h.submit(refund("PAY-1", 119))
		h.delegate(security, deputyID, 24*time.Hour)
		if err := h.decideAs(run.ID, devops1); err != nil {
			t.Fatal(err)
		}
		if err := h.decideAs(run.ID, deputyID); err != nil {
			t.Fatalf("the delegate of security: %v", err)
		}
		v := h.get(run.ID)
		if v.Status != record.StatusExecuting || !v.Progress.Met {
			t.Fatalf("status %s, progress %+v: want executing and met", v.Status, v.Progress)
		}
		if d := v.Decisions[1]; d.By != deputyID || d.OnBehalfOf != security || d.Role != "security" {
			t.Fatalf("decision %+v, want %s on behalf of %s as security", d, deputyID, security)
		}
	})
	t.Run("no place left for the delegator", func(t *testing.T) {
		h := compositeHarness(t)
		run := h.submit(refund("PAY-1", 119))
		h.delegate(devops1, deputyID, 24*time.Hour)
		if err := h.decideAs(run.ID, devops2); err != nil {
			t.Fatal(err)
		}
		before := h.snapshot(run.ID)
		r := wantRefused(t, h.decideAs(run.ID, deputyID), record.CodeNoRole)
		if !strings.Contains(r.Msg, "still needed") {
			t.Errorf("refusal %q does not say what is still needed", r.Msg)
		}
		if h.snapshot(run.ID) != before {
			t.Error("a refused delegate changed the run")
		}
	})
}
