package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/storage"
)

// opsOutboxLimit bounds the outbox the Operations page lists: a queue
// longer than that is said, not listed.
const opsOutboxLimit = 100

// maxOpsError bounds the last error shown of an outbox message: it is a
// target's or Slack's answer.
const maxOpsError = 300

// readyTimeout bounds the readiness check the page makes, as a probe's.
const readyTimeout = 2 * time.Second

// opsData is the Operations page.
type opsData struct {
	Ready     string // "" when ready
	ReadyKnow bool   // the host says how its loops are
	Outbox    []outboxRow
	More      bool // the outbox has more than opsOutboxLimit messages
	Anchor    string
	Setup     []string
}

type outboxRow struct {
	ID          int64
	Kind, RunID string
	Attempts    int
	Next        string
	LastError   string
	Created     string
}

// ops shows what an operator watches: the outbox's undelivered messages,
// whether the loops run (the host's readiness), the newest audit anchor
// published and the config in use, in words.
func (c *Console) ops(w http.ResponseWriter, r *http.Request, se *session) {
	d := opsData{Setup: c.cfg.Setup}
	if c.cfg.Ready != nil {
		d.ReadyKnow = true
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := c.cfg.Ready(ctx)
		cancel()
		if err != nil {
			d.Ready = show.Inert(err.Error())
		}
	}
	ms, err := c.eng.Outbox().List(r.Context(), storage.OutboxFilter{Limit: opsOutboxLimit + 1})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if len(ms) > opsOutboxLimit {
		ms, d.More = ms[:opsOutboxLimit], true
	}
	now := c.clock.Now()
	for _, m := range ms {
		d.Outbox = append(d.Outbox, outboxRow{ID: m.ID, Kind: string(m.Kind), RunID: m.RunID, Attempts: m.Attempts,
			Next: until(now, m.NextAttempt), LastError: cut(show.Inert(m.LastError), maxOpsError), Created: ago(now, m.CreatedAt)})
	}
	if c.cfg.Anchor != nil {
		if a, ok := c.cfg.Anchor(); ok {
			d.Anchor = a.String()
		}
	}
	c.render(w, r, http.StatusOK, "ops", c.newPage(se, "Operations", d))
}

// cut shortens s to at most n bytes, on a character boundary, saying so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
