package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// fileStepUp is a rule's step_up: how recent an approver's sign-in on the
// web console must be for their approval to count.
type fileStepUp struct {
	MaxAge string `yaml:"max_age"`
}

// DefaultStepUp is the max age of confirm: web without a step_up of its own.
const DefaultStepUp = 5 * time.Minute

// stepUp reads a rule's confirm: web and step_up: {max_age: …}, which say the
// same (step_up's max_age wins when both are given): approvals count only
// when given on the web console by someone who signed in within max_age.
// 0 when the rule says neither.
func (c *checker) stepUp(i int, fr fileRule) (record.Seconds, error) {
	base := fmt.Sprintf("policy.rules[%d]", i)
	confirm := strings.TrimSpace(fr.Confirm)
	if confirm != "" && confirm != "web" {
		return 0, c.failf(base+".confirm", "%q: the one place to confirm an approval is web (confirm: web)", fr.Confirm)
	}
	if confirm == "" && fr.StepUp == nil {
		return 0, nil
	}
	if fr.Approval == nil {
		return 0, c.failf(base, "confirm: web and step_up need an approval: the rule needs none, so there is nothing to confirm")
	}
	d := DefaultStepUp
	if fr.StepUp != nil {
		var err error
		if d, err = c.wholeDuration(base+".step_up.max_age", fr.StepUp.MaxAge); err != nil {
			return 0, err
		}
	}
	return record.Seconds(d / time.Second), nil
}
