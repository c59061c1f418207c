package bot

import (
	"fmt"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// Budgets of the approval message's status: it stays a summary of one
// screen however long the run's history grows, and the thread has the rest
// (KindDetail).
const (
	maxDecisionLines   = 5 // the latest decisions and edits
	maxResolutionLines = 3 // the latest resolutions
	maxOperationLines  = 8 // the first actions' outcomes
	// maxShownReason and maxOpError bound a reason and a target's error in
	// the summary; the thread shows more of them.
	maxShownReason = 200
	maxOpError     = 150
)

// outcomeText is what became of the actions: the resolutions of the run
// and each action's receipt or error, bounded like the status.
func outcomeText(v *workflow.RunView) string {
	var resolved []string
	for _, r := range v.Resolutions {
		resolved = append(resolved, fmt.Sprintf(":wrench: *Resolved* by %s %s: %s%s", mdMention(r.By, ""), slackDate(r.At), mdEscape(r.Choice.Describe()), reasonSuffix(r.Reason)))
	}
	lines := latestLines(resolved, maxResolutionLines, "resolutions", v.ID)
	lines = append(lines, firstLines(operationLines(v), maxOperationLines, "actions", v.ID)...)
	return cutLines(lines, MaxSectionText, func(n int) string { return fmt.Sprintf("…and %d more lines", n) })
}

// latestLines keeps the last max of lines, after a line counting the
// earlier ones.
func latestLines(lines []string, max int, what, runID string) []string {
	if len(lines) <= max {
		return lines
	}
	more := fmt.Sprintf("…and %d earlier %s in the thread (all of them: %s)", len(lines)-max, what, mdCode("signoff show "+runID, 100))
	return append([]string{more}, lines[len(lines)-max:]...)
}

// firstLines keeps the first max of lines, and a line counting the rest.
func firstLines(lines []string, max int, what, runID string) []string {
	if len(lines) <= max {
		return lines
	}
	more := fmt.Sprintf("…and %d more %s in the thread (all of them: %s)", len(lines)-max, what, mdCode("signoff show "+runID, 100))
	return append(lines[:max:max], more)
}

// maxDecidedActions bounds the actions a message shows once nobody can
// approve from it any more: what ran is in the outcome lines and the thread.
const maxDecidedActions = 5

// actionSections is how many actions the message shows one per section:
// while it awaits a decision, as many as an approval needs shown whole.
func actionSections(v *workflow.RunView, now time.Time) int {
	if awaitsDecision(v, now) {
		return maxActionSections
	}
	return maxDecidedActions
}
