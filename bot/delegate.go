package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// ParseUntil reads when a delegation ends: an RFC 3339 time, or a date
// (YYYY-MM-DD), which means through that day in UTC, so the end of it.
// The CLI reads its --until with it too.
func ParseUntil(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d.AddDate(0, 0, 1), nil
	}
	return time.Time{}, fmt.Errorf("not a date: %q (give YYYY-MM-DD, or an RFC 3339 time like 2026-12-24T18:00:00Z)", cutText(s, 40))
}

// delegationEngine is what the delegate commands need of the engine (a
// *workflow.Engine has it); an engine without it answers that it cannot.
type delegationEngine interface {
	Delegate(ctx context.Context, d record.Delegation) (*record.Delegation, error)
	Delegations(ctx context.Context, who string, all bool) ([]*record.Delegation, error)
}

var _ delegationEngine = (*workflow.Engine)(nil)

const noDelegations = "This signoff does not take delegations."

// delegateArgs is what `/runs delegate @person until DATE [reason…]` says.
type delegateArgs struct {
	to     record.Person
	until  time.Time
	reason string
}

// errDelegateUsage is a delegate command not of its form.
var errDelegateUsage = errors.New("not of the form delegate @person until DATE [reason]")

// parseDelegate reads the text of a delegate command strictly: the word
// delegate, one mention, the word until, a date, then the reason as typed.
func parseDelegate(text string) (delegateArgs, error) {
	args := strings.Fields(text)
	if len(args) < 4 || !strings.EqualFold(args[0], "delegate") || !strings.EqualFold(args[2], "until") {
		return delegateArgs{}, errDelegateUsage
	}
	to, ok := parseMention(args[1])
	if !ok {
		return delegateArgs{}, errDelegateUsage
	}
	until, err := ParseUntil(args[3])
	if err != nil {
		return delegateArgs{}, err
	}
	return delegateArgs{to: to, until: until, reason: unescapeSlack(restAfter(text, 4))}, nil
}

// delegate records, for who typed it, that the person mentioned may decide
// on their behalf until the date.
func (s *Server) delegate(ctx context.Context, who record.Person, text string, log *slog.Logger) Response {
	if id, revoke := revokeArgs(text); revoke {
		return s.undelegate(ctx, who, id, log)
	}
	a, err := parseDelegate(text)
	if err != nil {
		return reply("Say whom and until when: `" + mdEscape(s.slash) + " delegate @person until YYYY-MM-DD [reason]` (" + mdEscape(err.Error()) + ").")
	}
	eng, ok := s.eng.(delegationEngine)
	if !ok {
		return reply(noDelegations)
	}
	d, err := eng.Delegate(ctx, record.Delegation{From: who.ID, To: a.to.ID, Until: a.until, Reason: a.reason, CreatedBy: who.ID})
	if err != nil {
		return reply(s.commandRefusal(err, log))
	}
	log.Info("slack delegation recorded", "delegation_id", d.ID, "to", d.To, "until", d.Until)
	return reply(fmt.Sprintf("Until %s, %s may decide on your behalf what you may (never a request of yours or theirs). Delegation %s.",
		slackDate(d.Until), mdMention(d.To, ""), mdCode(d.ID, 60)))
}

// revokeArgs reads `undelegate ID` and `delegate revoke ID`: revoke says
// the text is one of them, id is "" when it is not followed by exactly one
// id.
func revokeArgs(text string) (id string, revoke bool) {
	args := strings.Fields(text)
	n := 1
	switch {
	case len(args) >= 1 && strings.EqualFold(args[0], "undelegate"):
	case len(args) >= 2 && strings.EqualFold(args[0], "delegate") && strings.EqualFold(args[1], "revoke"):
		n = 2
	default:
		return "", false
	}
	if len(args) != n+1 {
		return "", true
	}
	return args[n], true
}

// delegationRevoker is an engine that ends delegations before their time
// (*workflow.Engine is one).
type delegationRevoker interface {
	RevokeDelegation(ctx context.Context, id, by string) (*record.Delegation, error)
}

var _ delegationRevoker = (*workflow.Engine)(nil)

// undelegate is `/runs undelegate ID` and `/runs delegate revoke ID`: who
// typed it ends delegation id, which the engine lets its delegator, its
// delegate or whoever made it do.
func (s *Server) undelegate(ctx context.Context, who record.Person, id string, log *slog.Logger) Response {
	if id == "" {
		return reply("Say which delegation: `" + mdEscape(s.slash) + " undelegate ID`, its id as `" + mdEscape(s.slash) + " delegations` shows it.")
	}
	eng, ok := s.eng.(delegationRevoker)
	if !ok {
		return reply(noDelegations)
	}
	d, err := eng.RevokeDelegation(ctx, id, who.ID)
	if err != nil {
		return reply(s.commandRefusal(err, log))
	}
	log.Info("slack delegation revoked", "delegation_id", d.ID, "from", d.From, "to", d.To)
	return reply(fmt.Sprintf("Revoked delegation %s: %s no longer decides on behalf of %s.", mdCode(d.ID, 60), mdMention(d.To, ""), mdMention(d.From, "")))
}

// delegations lists the delegations from and to who that hold now.
func (s *Server) delegations(ctx context.Context, who record.Person, log *slog.Logger) Response {
	eng, ok := s.eng.(delegationEngine)
	if !ok {
		return reply(noDelegations)
	}
	ds, err := eng.Delegations(ctx, who.ID, false)
	if err != nil {
		log.Error("list delegations", "err", err)
		return reply("signoff could not list the delegations (an internal error). Try again.")
	}
	if len(ds) == 0 {
		return reply("No delegation from or to you holds now.")
	}
	lines := []string{"*Delegations that hold now*"}
	for _, d := range ds {
		line := fmt.Sprintf("• %s may decide on behalf of %s until %s (%s)", mdMention(d.To, ""), mdMention(d.From, ""), slackDate(d.Until), mdCode(d.ID, 60))
		if d.Reason != "" {
			line += ": " + mdEscape(cutText(d.Reason, 200))
		}
		lines = append(lines, line)
	}
	return reply(strings.Join(lines, "\n"))
}

// isDeputy says whether a delegation to userID holds now, looked up only
// for someone who could not decide in their own right (qualified); whether
// it covers a request is the engine's to say.
func (s *Server) isDeputy(ctx context.Context, userID string, qualified bool) bool {
	eng, ok := s.eng.(delegationEngine)
	if qualified || !ok {
		return false
	}
	ds, err := eng.Delegations(ctx, userID, false)
	if err != nil {
		return false // the engine will say
	}
	for _, d := range ds {
		if d.To == userID {
			return true
		}
	}
	return false
}

// decidedBy is who decided, as the message says it: "<@B> on behalf of
// <@A>" for a decision under a delegation.
func decidedBy(d workflow.DecisionView) string {
	if d.OnBehalfOf == "" {
		return mdMention(d.By, d.Name)
	}
	return mdMention(d.By, d.Name) + " on behalf of " + mdMention(d.OnBehalfOf, "")
}
