package policy

import (
	"errors"
	"fmt"

	"github.com/signoff-dev/signoff/record"
)

// checkBreakGlass refuses a break_glass a rule cannot keep: none without an
// approval; a known role that may force, a known role that reviews, and a
// positive time to review within.
func checkBreakGlass(b *record.BreakGlass, a *record.ApprovalSpec, roles *Roles) error {
	if b == nil {
		return nil
	}
	if a == nil {
		return errors.New("a rule without an approval has nothing to force")
	}
	if a.StepUp > 0 {
		return errors.New("a rule that asks for a fresh sign-in (confirm: web, step_up) cannot be forced: a forced approval would skip it")
	}
	switch {
	case b.Role == "":
		return errors.New("the role that may force is required")
	case b.Review.Role == "":
		return errors.New("the role that reviews a forced approval is required")
	case b.Review.Within < 1:
		return errors.New("the review's within must be at least 1s")
	}
	if roles != nil {
		for _, r := range []string{b.Role, b.Review.Role} {
			if _, ok := roles.Rank(r); !ok {
				return fmt.Errorf("unknown role %q", r)
			}
		}
	}
	return nil
}

func cloneBreakGlass(b *record.BreakGlass) *record.BreakGlass {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}
