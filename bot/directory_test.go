package bot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/clocktest"
)

// fakeLister serves user groups from a map and counts the calls.
type fakeLister struct {
	mu     sync.Mutex
	groups map[string][]string
	err    error
	calls  atomic.Int64
}

var _ UserGroupLister = (*fakeLister)(nil)

func (f *fakeLister) GetUserGroupMembersContext(_ context.Context, group string) ([]string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.groups[group], nil
}

func (f *fakeLister) set(groups map[string][]string, err error) {
	f.mu.Lock()
	f.groups, f.err = groups, err
	f.mu.Unlock()
}

func dirRoles(t *testing.T) *policy.Roles {
	r, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:resolver"}},
		{Name: "team_lead", Members: []string{leadGrace}},
		{Name: "manager", Members: []string{manager}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDirectoryRoles(t *testing.T) {
	lister := &fakeLister{groups: map[string][]string{
		"S0LEADS001": {"U0INGROUP1", leadGrace, "U0BOTHGRP1"},
		"S0MGRS0001": {"U0BOTHGRP1", "U0MGRGRP01"},
	}}
	clock := clocktest.New(hStart)
	d := NewDirectory(dirRoles(t), map[string]string{"team_lead": "S0LEADS001", "manager": "S0MGRS0001", "ghost": "S0GHOST001"}, lister, 5*time.Minute, clock)
	for _, tc := range []struct {
		user, role string
		ok         bool
	}{
		{leadGrace, "team_lead", true},    // config; the lead group adds nothing
		{manager, "manager", true},        // config, highest: no call needed
		{"U0INGROUP1", "team_lead", true}, // a group only
		{"U0BOTHGRP1", "manager", true},   // two groups: the highest wins
		{"U0MGRGRP01", "manager", true},   // the manager group
		{"agent:resolver", "agent", true}, // config, below every group
		{"U0STRANGER", "", false},         // nowhere
	} {
		role, ok, err := d.RoleOf(context.Background(), tc.user)
		if err != nil || role != tc.role || ok != tc.ok {
			t.Errorf("RoleOf(%s) = %q %v %v, want %q %v", tc.user, role, ok, err, tc.role, tc.ok)
		}
	}
	if n := lister.calls.Load(); n != 2 {
		t.Errorf("%d usergroups.users.list calls, want 2 (one per group, cached)", n)
	}
	// A config member who is also in a higher group is promoted.
	lister.set(map[string][]string{"S0MGRS0001": {leadGrace}}, nil)
	clock.Advance(5 * time.Minute)
	if role, _, _ := d.RoleOf(context.Background(), leadGrace); role != "manager" {
		t.Errorf("after the cache expired, %s is %q, want manager", leadGrace, role)
	}
	// Removed from the group: gone once the cache expires, not before.
	lister.set(map[string][]string{}, nil)
	if role, _, _ := d.RoleOf(context.Background(), leadGrace); role != "manager" {
		t.Errorf("within the ttl, %s is %q, want the cached manager", leadGrace, role)
	}
	clock.Advance(5 * time.Minute)
	if role, _, _ := d.RoleOf(context.Background(), leadGrace); role != "team_lead" {
		t.Errorf("after the ttl, %s is %q, want team_lead from the config", leadGrace, role)
	}
}

func TestDirectoryFailsClosed(t *testing.T) {
	lister := &fakeLister{err: errors.New("slack: plan_upgrade_required")}
	clock := clocktest.New(hStart)
	d := NewDirectory(dirRoles(t), map[string]string{"team_lead": "S0LEADS001"}, lister, 10*time.Minute, clock)
	// Not in the config: the error, never "no role" and never a role.
	role, ok, err := d.RoleOf(context.Background(), "U0INGROUP1")
	if !errors.Is(err, ErrRoleLookup) || ok || role != "" {
		t.Fatalf("RoleOf = %q %v %v, want ErrRoleLookup", role, ok, err)
	}
	// In the config below the group's role: keeps the config role.
	if role, ok, err := d.RoleOf(context.Background(), "agent:resolver"); err != nil || !ok || role != "agent" {
		t.Fatalf("config member = %q %v %v", role, ok, err)
	}
	// The failure is remembered for a tenth of the ttl: an outage is not hammered.
	calls := lister.calls.Load()
	d.RoleOf(context.Background(), "U0INGROUP1")
	if lister.calls.Load() != calls {
		t.Fatal("a failed lookup was retried at once")
	}
	lister.set(map[string][]string{"S0LEADS001": {"U0INGROUP1"}}, nil)
	clock.Advance(time.Minute)
	if role, ok, err := d.RoleOf(context.Background(), "U0INGROUP1"); err != nil || !ok || role != "team_lead" {
		t.Fatalf("after Slack is back: %q %v %v", role, ok, err)
	}
	// No lister at all with groups configured: fail closed too.
	d = NewDirectory(dirRoles(t), map[string]string{"team_lead": "S0LEADS001"}, nil, time.Minute, clock)
	if _, _, err := d.RoleOf(context.Background(), "U0INGROUP1"); !errors.Is(err, ErrRoleLookup) {
		t.Fatalf("no lister: %v", err)
	}
}

// TestDirectoryBurst: fifty clicks at once cost one Slack call.
func TestDirectoryBurst(t *testing.T) {
	lister := &fakeLister{groups: map[string][]string{"S0LEADS001": {"U0INGROUP1"}}}
	d := NewDirectory(dirRoles(t), map[string]string{"team_lead": "S0LEADS001"}, lister, time.Minute, nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if role, ok, err := d.RoleOf(context.Background(), "U0INGROUP1"); err != nil || !ok || role != "team_lead" {
				t.Errorf("RoleOf = %q %v %v", role, ok, err)
			}
		})
	}
	wg.Wait()
	if n := lister.calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// TestDirectoryCancelledCallerIsNotCached: a caller that gave up says nothing
// about Slack, so the next caller asks again.
func TestDirectoryCancelledCallerIsNotCached(t *testing.T) {
	lister := &fakeLister{err: context.Canceled}
	d := NewDirectory(dirRoles(t), map[string]string{"team_lead": "S0LEADS001"}, lister, time.Minute, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := d.RoleOf(ctx, "U0INGROUP1"); err == nil {
		t.Fatal("no error from a cancelled lookup")
	}
	lister.set(map[string][]string{"S0LEADS001": {"U0INGROUP1"}}, nil)
	if role, _, err := d.RoleOf(context.Background(), "U0INGROUP1"); err != nil || role != "team_lead" {
		t.Fatalf("after a cancelled caller: %q %v", role, err)
	}
}
