package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// ErrRoleLookup wraps every failure to ask Slack who is in a user group, so
// that a refused click can say "try again" rather than "you have no role".
var ErrRoleLookup = errors.New("could not look up Slack user groups")

// UserGroupLister lists the members of a Slack user group
// (usergroups.users.list). *slack.Client satisfies it.
type UserGroupLister interface {
	GetUserGroupMembersContext(ctx context.Context, userGroup string) ([]string, error)
}

// Directory resolves a Slack user's role: the members the config names first,
// then the Slack user groups mapped to roles, cached for a while because
// usergroups.users.list allows about 20 calls a minute. The highest role wins.
// It implements workflow.Directory.
type Directory struct {
	roles  *policy.Roles
	groups []roleGroup // highest role first
	lister UserGroupLister
	ttl    time.Duration
	clock  workflow.Clock

	mu    sync.Mutex
	cache map[string]*groupEntry // by group id
}

var _ workflow.Directory = (*Directory)(nil)

type roleGroup struct {
	role, group string
	rank        int
}

// groupEntry is one group's members as last fetched. fetch serialises calls
// for the same group, so a burst of clicks costs one Slack call, not fifty.
type groupEntry struct {
	fetch   sync.Mutex
	members map[string]bool
	err     error
	at      time.Time
}

// NewDirectory builds a Directory. groups maps a role to a user group id;
// roles the config does not know are ignored, since nobody could be let in by
// them. lister may be nil when groups is empty. ttl is how long a group's
// members are trusted; a failed lookup is remembered for a tenth of it, so a
// Slack outage is not hammered by every click.
func NewDirectory(roles *policy.Roles, groups map[string]string, lister UserGroupLister, ttl time.Duration, clock workflow.Clock) *Directory {
	if clock == nil {
		clock = workflow.SystemClock{}
	}
	d := &Directory{roles: roles, lister: lister, ttl: ttl, clock: clock, cache: map[string]*groupEntry{}}
	for role, group := range groups {
		rank, ok := roles.Rank(role)
		if !ok || group == "" {
			continue
		}
		d.groups = append(d.groups, roleGroup{role: role, group: group, rank: rank})
	}
	// Highest first: the first group that holds the user decides.
	for i := 1; i < len(d.groups); i++ {
		for j := i; j > 0 && (d.groups[j].rank > d.groups[j-1].rank ||
			d.groups[j].rank == d.groups[j-1].rank && d.groups[j].group < d.groups[j-1].group); j-- {
			d.groups[j], d.groups[j-1] = d.groups[j-1], d.groups[j]
		}
	}
	return d
}

// RoleOf returns the highest role userID holds in the config or through a
// user group. A user the config does not name, whose groups cannot be listed,
// gets the error: without knowing, nobody is let in. A user the config names
// keeps that role when a group lookup for a higher one fails.
func (d *Directory) RoleOf(ctx context.Context, userID string) (string, bool, error) {
	role, ok := d.roles.RoleOf(userID)
	rank := -1
	if ok {
		rank, _ = d.roles.Rank(role)
	}
	for _, g := range d.groups {
		if g.rank <= rank {
			break // the config already grants this or more
		}
		in, err := d.member(ctx, g.group, userID)
		if err != nil {
			if ok {
				return role, true, nil
			}
			return "", false, fmt.Errorf("%w: group %s of role %s: %w", ErrRoleLookup, g.group, g.role, err)
		}
		if in {
			return g.role, true, nil
		}
	}
	return role, ok, nil
}

func (d *Directory) member(ctx context.Context, group, userID string) (bool, error) {
	if d.lister == nil {
		return false, errors.New("no Slack client to list user groups with")
	}
	d.mu.Lock()
	e := d.cache[group]
	if e == nil {
		e = &groupEntry{}
		d.cache[group] = e
	}
	d.mu.Unlock()

	e.fetch.Lock()
	defer e.fetch.Unlock()
	now := d.clock.Now()
	fresh := d.ttl
	if e.err != nil {
		fresh = d.ttl / 10
	}
	if e.at.IsZero() || now.Sub(e.at) >= fresh || now.Before(e.at) {
		ids, err := d.lister.GetUserGroupMembersContext(ctx, group)
		if err != nil && ctx.Err() != nil {
			// Our caller gave up; that says nothing about Slack, so nothing is remembered.
			return false, err
		}
		e.at, e.err = now, err
		if err == nil {
			e.members = make(map[string]bool, len(ids))
			for _, id := range ids {
				e.members[id] = true
			}
		}
	}
	if e.err != nil {
		return false, e.err
	}
	return e.members[userID], nil
}
