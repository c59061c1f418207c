package bot

import (
	"context"
	"fmt"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
	"github.com/slack-go/slack"
)

// replyWhilePending posts what render makes as a reply in the thread of the
// approval message of request requestID of v (row m, posted once: postOnce),
// and says where it went. A
// reply about a request that is no longer pending (decided, or the run
// stopped waiting) is dropped: sent is false and err nil. what names the
// reply in errors and logs (a reminder, an escalation).
func (d *Dispatcher) replyWhilePending(ctx context.Context, m *record.OutboxMessage, v *workflow.RunView, requestID, what string,
	render func(r workflow.RequestView) ([]slack.Block, string)) (sent bool, ch, ts, threadTS string, err error) {
	r, ok := requestOf(v, requestID)
	if !ok || r.Status != record.RequestPending || v.Status != record.StatusWaitingApproval {
		d.log().Info("slack "+what+" dropped: the request is no longer pending", "run_id", v.ID, "request_id", requestID)
		return false, "", "", "", nil
	}
	if r.MessageTS == "" {
		return false, "", "", "", fmt.Errorf("%s of run %s: the approval message of request %s is not posted yet", what, v.ID, r.ID)
	}
	blocks, text := render(r)
	ch, ts, err = d.postOnce(ctx, m, r.Channel, r.MessageTS, blocks, text)
	if err != nil {
		return false, "", "", "", err
	}
	return true, ch, ts, r.MessageTS, nil
}
