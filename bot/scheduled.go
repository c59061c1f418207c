package bot

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// scheduledBlocks is the section of /runs pending that lists the approved
// runs waiting for their execution window, oldest first, each with when
// it runs; none when there are none.
func (s *Server) scheduledBlocks(ctx context.Context, log *slog.Logger) ([]slack.Block, error) {
	runs, err := s.pendingViews(ctx, storage.RunFilter{Statuses: []record.Status{record.StatusScheduled}, Limit: pendingPageSize + 1}, 0, log)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	more := len(runs) > pendingPageSize
	runs = runs[:min(len(runs), pendingPageSize)]
	now := s.clock.Now()
	blocks := []slack.Block{slack.NewHeaderBlock(bkPlain("Scheduled: approved, waiting for their window"))}
	for _, r := range runs {
		if r.read {
			r.v = workflow.RedactedView(r.v, s.eng.Action)
		}
		r.v.Deadline = nil // over: the run was approved
		line := pendingLine(r, now)
		if at := r.v.ScheduledFor; at != nil {
			line += " · runs " + slackDate(*at) + " (" + untilText(now, *at) + ")"
		}
		blocks = append(blocks, bkSection(line))
	}
	if more {
		blocks = append(blocks, slack.NewContextBlock("", bkMrkdwn(fmt.Sprintf("More scheduled runs: `signoff runs --status %s`", record.StatusScheduled))))
	}
	return blocks, nil
}

// scheduledLine is where an approved run that waits for its execution
// window stands, in the approval message: when it runs, and in which window.
func scheduledLine(v *workflow.RunView) string {
	line := ":calendar: *Scheduled*: approved; it runs"
	if v.ScheduledFor != nil {
		line += " " + slackDate(*v.ScheduledFor)
	}
	if v.Gate != nil && v.Gate.Window != nil {
		line += ", when its execution window (" + mdEscape(v.Gate.Window.String()) + ") opens"
	}
	return line + ". Nothing was done yet."
}
