package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// fileBreakGlass is a rule's break_glass: who may force its approval, and
// who reviews a forced one within how long.
type fileBreakGlass struct {
	Role   string `yaml:"role"`
	Review *struct {
		Role   string `yaml:"role"`
		Within string `yaml:"within"`
	} `yaml:"review"`
}

// breakGlass reads a rule's break_glass: a known role that may force, and a
// review by a known role within a positive time; both are required, so that
// no forced approval goes unreviewed by default.
func (c *checker) breakGlass(i int, fr fileRule, roles *policy.Roles) (*record.BreakGlass, error) {
	fb := fr.BreakGlass
	if fb == nil {
		return nil, nil
	}
	path := fmt.Sprintf("policy.rules[%d].break_glass", i)
	if fr.Approval == nil {
		return nil, c.failf(path, "the rule needs no approval, so there is nothing to force")
	}
	known := func(p, role, what string) error {
		if strings.TrimSpace(role) == "" {
			return c.failf(p, "required: the role that %s", what)
		}
		if _, ok := roles.Rank(role); !ok {
			return c.failf(p, "%q is not a role: roles are %s", role, strings.Join(roles.Names(), ", "))
		}
		return nil
	}
	if err := known(path+".role", fb.Role, "may force the approval, e.g. {role: incident_commander}"); err != nil {
		return nil, err
	}
	if fb.Review == nil {
		return nil, c.failf(path+".review", "required: who reviews a forced approval and how soon, e.g. {role: security, within: 24h}")
	}
	if err := known(path+".review.role", fb.Review.Role, "reviews a forced approval"); err != nil {
		return nil, err
	}
	within, err := c.wholeDuration(path+".review.within", fb.Review.Within)
	if err != nil {
		return nil, err
	}
	return &record.BreakGlass{Role: fb.Role, Review: record.BreakGlassReview{Role: fb.Review.Role, Within: record.Seconds(within / time.Second)}}, nil
}

// breakGlassAudit refuses a config whose rules may be forced while its
// slack: section names no audit_channel: a forced approval is announced
// there. Without a slack: section there is nobody to tell, which is only
// a warning (the audit log has the policy_bypassed event).
func (c *checker) breakGlassAudit(cfg *Config) error {
	for i, r := range cfg.Policy.Rules() {
		if r.BreakGlass == nil {
			continue
		}
		path := fmt.Sprintf("policy.rules[%d].break_glass", i)
		switch {
		case !cfg.Slack.Given:
			c.warnf(path, "the config has no slack: section, so a forced approval is announced nowhere")
		case cfg.Slack.AuditChannel == "":
			return c.failf(path, "a rule that may be forced needs slack.audit_channel, the channel where a forced approval is announced")
		}
	}
	return nil
}
