package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

var (
	triggers   atomic.Int64
	triggerIDs = regexp.MustCompile(`("trigger_id"\s*:\s*"|trigger_id=)\d+\.\d+\.`)
)

// freshTrigger gives a filled Slack fixture a trigger id of its own, as
// Slack gives every click and command: two clicks made from one fixture in
// the same second are two requests, not one sent twice (which the server
// answers once).
func freshTrigger(s string) string {
	n := triggers.Add(1)
	return triggerIDs.ReplaceAllString(s, "${1}"+strconv.FormatInt(7811284101234+n, 10)+".4471802230.")
}

// signedRequest is one request as Slack sent it, to send again unchanged.
type signedRequest struct {
	path string
	body []byte
	hdr  http.Header
}

func signNow(path string, body []byte) signedRequest {
	return signedRequest{path, body, bot.SignedHeader(serveSecret, time.Now().Unix(), body)}
}

// answer is what a client sees of an answer.
type answer struct {
	status      int
	contentType string
	body        string
}

func (c *cluster) sendTo(t *testing.T, r *replica, req signedRequest, extra ...string) answer {
	t.Helper()
	return sendSigned(t, c.client, r.name, r.addr, req, extra...)
}

// sendSigned sends req to the server named name on addr, with the extra
// headers (name, value, …) set over its own.
func sendSigned(t *testing.T, client *http.Client, name, addr string, req signedRequest, extra ...string) answer {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, "http://"+addr+req.path, bytes.NewReader(req.body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header = req.hdr.Clone()
	for i := 0; i+1 < len(extra); i += 2 {
		hr.Header.Set(extra[i], extra[i+1])
	}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatalf("send to %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// stored is what a request could change of a run, as stored: the run as
// `show --json` prints it, its approval requests and decisions, and the
// number of audit events of every run.
func (c *cluster) stored(t *testing.T, id string) string {
	t.Helper()
	v, err := json.Marshal(c.get(t, id))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(v)
	err = c.app.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		reqs, err := tx.RequestsForRun(ctx, id)
		if err != nil {
			return err
		}
		ds, err := tx.Decisions(ctx, id)
		if err != nil {
			return err
		}
		audit, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		if err != nil {
			return err
		}
		j, _ := json.Marshal([]any{reqs, ds})
		fmt.Fprintf(&b, "\n%s\naudit events: %d", j, len(audit))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// quiet waits until every Slack message is delivered: delivery writes where
// a message was posted, which is not what a copy of a request changes.
func (c *cluster) quiet(t *testing.T) {
	t.Helper()
	eventually(t, "every Slack message to be delivered", 60*time.Second, func() bool {
		var due []*record.OutboxMessage
		err := c.app.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
			var err error
			due, err = tx.DueOutbox(ctx, time.Now().Add(1000*time.Hour), 1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(due) == 0
	})
}

// TestReplayAcrossReplicas: a signed click and a signed /runs extend, sent to
// replica A and then sent again, unchanged, to replica B (and once more to
// A as Slack's retry), get the first answer and change nothing: the replicas
// share what they have seen through PostgreSQL.
func TestReplayAcrossReplicas(t *testing.T) {
	c := newCluster(t, 2)
	a := c.start(0, "replica-a")
	b := c.start(1, "replica-b")
	body, err := os.ReadFile(fixture("refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(key string) *workflow.RunView {
		p, err := workflow.ParseProposal(body)
		if err != nil {
			t.Fatal(err)
		}
		p.IdempotencyKey = key
		v, err := c.submit(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	replayed := func(t *testing.T, id string, req signedRequest, first answer) {
		t.Helper()
		c.quiet(t)
		before := c.stored(t, id)
		for _, send := range []struct {
			to    *replica
			extra []string
		}{{b, nil}, {a, []string{bot.HeaderRetryNum, "1", "X-Slack-Retry-Reason", "http_timeout"}}, {b, nil}} {
			if got := c.sendTo(t, send.to, req, send.extra...); got != first {
				t.Errorf("copy sent to %s %v: %+v, want the first answer %+v", send.to.name, send.extra, got, first)
			}
		}
		c.quiet(t)
		if after := c.stored(t, id); after != before {
			t.Errorf("the copies changed the store:\nbefore %s\nafter  %s", before, after)
		}
	}

	t.Run("extend", func(t *testing.T) {
		v := submit("replay-extend")
		deadline := *v.Deadline
		form := []byte(freshTrigger(strings.NewReplacer("{{USER_ID}}", lead1, "{{TEXT}}", url.QueryEscape("extend "+v.ID+" 2d")).
			Replace(strings.TrimSpace(string(readSlackFixture(t, "slash_runs.form"))))))
		req := signNow("/slack/commands", form)
		first := c.sendTo(t, a, req)
		if first.status != http.StatusOK || !strings.Contains(first.body, "The deadline of run") {
			t.Fatalf("extend at replica-a: %+v", first)
		}
		replayed(t, v.ID, req, first)
		if got, want := *c.get(t, v.ID).Deadline, deadline.Add(48*time.Hour); !got.Equal(want) {
			t.Errorf("deadline %v after one extend sent four times, want %v (moved once)", got, want)
		}
	})

	t.Run("approve", func(t *testing.T) {
		v := submit("replay-approve")
		req := signNow("/slack/interactions", interaction(readSlackFixture(t, "block_actions_approve.json"), v, lead1, ""))
		first := c.sendTo(t, a, req)
		if first.status != http.StatusOK {
			t.Fatalf("approve at replica-a: %+v", first)
		}
		// The workers finish the run; what the copies could change is then still.
		eventually(t, "the approved run to finish", 60*time.Second, func() bool { return c.get(t, v.ID).Status == record.StatusDone })
		told := len(c.slack.Calls("chat.postEphemeral"))
		replayed(t, v.ID, req, first)
		if n := len(c.slack.Calls("chat.postEphemeral")) - told; n != 0 {
			t.Errorf("the copies told someone %d things", n)
		}
		c.oneRefund(t, v.ID+"/1")
		if ds := c.get(t, v.ID).Decisions; len(ds) != 1 || ds[0].By != lead1 {
			t.Errorf("decisions %+v, want one by %s", ds, lead1)
		}
	})
	a.stop(t)
	b.stop(t)
}
