package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/api/client"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// TestAPI runs every documented operation, answers and refusals, against a
// real engine on SQLite; the conformance wrapper holds each request and
// answer to openapi.yaml, and the end checks that every operation was seen
// both answering and refusing.
func TestAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.client(tokAll)

	// A waiting run (held by key k1) and a finished one.
	first, err := c.Submit(ctx, deployProposal("k1", "1.4.2"))
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Submit(ctx, &workflow.Proposal{Actions: []record.Action{{Name: "note", Args: json.RawMessage(`{"text":"hi"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != api.Status(record.StatusDone) {
		t.Fatalf("a note runs without approval; got %s", done.Status)
	}
	// Two runs whose outcome cannot be proven, for a person to resolve.
	stuck := make([]*api.SubmitResult, 2)
	for i := range stuck {
		s, err := c.Submit(ctx, &workflow.Proposal{Actions: []record.Action{{Name: "wobble", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}})
		if err != nil || s.Status != api.Status(record.StatusNeedsAttention) {
			t.Fatalf("a wobble's outcome cannot be proven; got %+v, %v", s, err)
		}
		stuck[i] = &s.SubmitResult
	}

	t.Run("submit answers 201 with where the run is and who may approve", func(t *testing.T) {
		if first.Location != "/v1/runs/"+first.Id || first.Replayed {
			t.Errorf("Location %q replayed %v", first.Location, first.Replayed)
		}
		if first.Status != "waiting_approval" || first.Fingerprint == nil || len(*first.Fingerprint) != 64 {
			t.Errorf("status %s fingerprint %v", first.Status, first.Fingerprint)
		}
		a := first.Approval
		if a == nil || a.Role != "team_lead" || a.Count != 1 || a.Remaining != 1 || a.Deadline.IsZero() {
			t.Fatalf("approval = %+v", a)
		}
	})

	t.Run("the same key and proposal is a replay", func(t *testing.T) {
		before := h.snapshot()
		body, _ := json.Marshal(deployProposal("k1", "1.4.2"))
		a := h.do("POST", "/v1/runs", tokAll, "application/json", body, false)
		if a.status != http.StatusOK || a.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %v %s", a.status, a.header, a.body)
		}
		var res api.SubmitResult
		if err := json.Unmarshal(a.body, &res); err != nil || !res.Replayed || res.Id != first.Id {
			t.Fatalf("replay answered %s (%v)", a.body, err)
		}
		if after := h.snapshot(); after.json(t) != before.json(t) {
			t.Errorf("a replay changed the store")
		}
	})

	t.Run("get shows the run as people see it: the redacted field hidden, the requester from the token", func(t *testing.T) {
		v, err := c.Get(ctx, first.Id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Requester.ID != "agent:resolver" {
			t.Errorf("requester %q, want the token's", v.Requester.ID)
		}
		if got := string(v.Actions[0].Args); strings.Contains(got, "s3cret") || !strings.Contains(got, record.Redaction) {
			t.Errorf("args shown %s", got)
		}
	})

	// The refusals. Each changes nothing in the store (runs, checkpoints,
	// audit), but an engine refusal of a run's change, which the audit log
	// records by design.
	big := append([]byte(`{"actions":[{"name":"note","args":{"text":"`), strings.Repeat("a", workflow.MaxProposalBytes)...)
	big = append(big, `"}}]}`...)
	note := `{"actions":[{"name":"note","args":{}}]}`
	refusals := []struct {
		name         string
		method, path string
		token, ctype string
		body         string
		status       int
		code         string
		runID        string
		fields       []string
		audited      bool
		check        func(t *testing.T, a answer)
	}{
		{name: "no token", method: "POST", path: "/v1/runs", ctype: "application/json", body: note, status: 401, code: "unauthorized",
			check: func(t *testing.T, a answer) {
				if got := a.header.Get("WWW-Authenticate"); got != `Bearer realm="signoff"` {
					t.Errorf("WWW-Authenticate %q", got)
				}
			}},
		{name: "unknown token", method: "GET", path: "/v1/runs", token: "sk_<script>", status: 401, code: "unauthorized",
			check: func(t *testing.T, a answer) {
				if got := a.header.Get("WWW-Authenticate"); got != `Bearer realm="signoff", error="invalid_token"` {
					t.Errorf("WWW-Authenticate %q", got)
				}
				if strings.Contains(string(a.body), "script") {
					t.Errorf("the token is echoed: %s", a.body)
				}
			}},
		{name: "wrong scope", method: "POST", path: "/v1/runs", token: tokRead, ctype: "application/json", body: note, status: 403, code: "insufficient_scope"},
		{name: "cancel without the cancel scope", method: "POST", path: "/v1/runs/" + first.Id + "/cancel", token: tokRead, ctype: "application/json", body: `{"reason":"x"}`, status: 403, code: "insufficient_scope"},
		{name: "requester spoofing", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"requester":{"id":"agent:other"},"actions":[{"name":"note","args":{}}]}`, status: 403, code: "requester_mismatch"},
		{name: "a token whose requester holds no role", method: "POST", path: "/v1/runs", token: tokNobody, ctype: "application/json", body: note, status: 403, code: "unknown_requester"},
		{name: "body over the limit", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json", body: string(big), status: 413, code: "too_large"},
		{name: "duplicate keys", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"note","args":{}}],"actions":[{"name":"note","args":{}}]}`, status: 400, code: "invalid_input"},
		{name: "duplicate keys inside the arguments", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"deploy","args":{"service":"a","service":"b","version":"1.0.0"}}]}`, status: 400, code: "invalid_input"},
		{name: "unknown field", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"note","args":{}}],"approved":true}`, status: 400, code: "invalid_input"},
		{name: "trailing data", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json", body: note + `{}`, status: 400, code: "invalid_input"},
		{name: "invalid UTF-8", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: "{\"summary\":\"\xff\",\"actions\":[{\"name\":\"note\",\"args\":{}}]}", status: 400, code: "invalid_input"},
		{name: "not JSON", method: "POST", path: "/v1/runs", token: tokAll, ctype: "text/plain", body: note, status: 415, code: "unsupported_media_type"},
		{name: "schema violations, one entry per field", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body:   `{"actions":[{"name":"note","args":{}},{"name":"deploy","args":{"service":"","version":"one","extra":1}}]}`,
			status: 422, code: "invalid_input", fields: []string{"actions[1].args.extra", "actions[1].args.service", "actions[1].args.version"}},
		{name: "a missing required argument", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"deploy","args":{"service":"api"}}]}`, status: 422, code: "invalid_input", fields: []string{"actions[0].args.version"}},
		{name: "an unknown action", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"rm_rf","args":{}}]}`, status: 422, code: "invalid_input", fields: []string{"actions[0].name"}},
		{name: "a callback_url outside the allow-list", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: `{"actions":[{"name":"note","args":{}}],"callback_url":"https://agents.example.evil/signoff/events"}`, status: 422, code: "callback_not_allowed",
			check: func(t *testing.T, a answer) {
				if !strings.Contains(string(a.body), callbackPrefix) {
					t.Errorf("the refusal does not say what is allowed: %s", a.body)
				}
			}},
		{name: "key reused with a different proposal", method: "POST", path: "/v1/runs", token: tokAll, ctype: "application/json",
			body: mustJSON(t, deployProposal("k1", "9.9.9")), status: 409, code: "idempotency_key_reused", runID: first.Id},
		{name: "unknown run", method: "GET", path: "/v1/runs/run_nope", token: tokAll, status: 404, code: "unknown_run", runID: "run_nope"},
		{name: "wait on an unknown run", method: "GET", path: "/v1/runs/run_nope/wait?timeout=1", token: tokAll, status: 404, code: "unknown_run", runID: "run_nope"},
		{name: "cancel an unknown run", method: "POST", path: "/v1/runs/run_nope/cancel", token: tokAll, ctype: "application/json",
			body: `{"reason":"x"}`, status: 404, code: "unknown_run", runID: "run_nope"},
		{name: "cancel a finished run", method: "POST", path: "/v1/runs/" + done.Id + "/cancel", token: tokAll, ctype: "application/json",
			body: `{"reason":"too late"}`, status: 409, code: "not_cancellable", runID: done.Id, audited: true},
		{name: "cancel someone else's run", method: "POST", path: "/v1/runs/" + first.Id + "/cancel", token: tokOther, ctype: "application/json",
			body: `{"reason":"mine now"}`, status: 404, code: "unknown_run", runID: first.Id},
		{name: "get someone else's run", method: "GET", path: "/v1/runs/" + first.Id, token: tokOther, status: 404, code: "unknown_run", runID: first.Id},
		{name: "list someone else's runs", method: "GET", path: "/v1/runs?requester=agent:other", token: tokAll, status: 403, code: "requester_mismatch"},
		{name: "resolve without the resolve scope", method: "POST", path: "/v1/runs/" + stuck[0].Id + "/resolve", token: tokRead, ctype: "application/json",
			body: `{"choice":"abandon","reason":"x"}`, status: 403, code: "insufficient_scope"},
		{name: "resolve by a requester without the resolve role", method: "POST", path: "/v1/runs/" + stuck[0].Id + "/resolve", token: tokAll, ctype: "application/json",
			body: `{"choice":"abandon","reason":"x"}`, status: 403, code: "no_role", runID: stuck[0].Id, audited: true},
		{name: "resolve a run that needs no attention", method: "POST", path: "/v1/runs/" + done.Id + "/resolve", token: tokOps, ctype: "application/json",
			body: `{"choice":"abandon","reason":"x"}`, status: 409, code: "nothing_to_resolve", runID: done.Id, audited: true},
		{name: "resolve with a receipt and a retry", method: "POST", path: "/v1/runs/" + stuck[0].Id + "/resolve", token: tokOps, ctype: "application/json",
			body: `{"choice":"retry","reason":"x","receipt":{"id":"D-1"}}`, status: 400, code: "invalid_input", runID: stuck[0].Id, audited: true},
		{name: "resolve with an unknown choice", method: "POST", path: "/v1/runs/" + stuck[0].Id + "/resolve", token: tokOps, ctype: "application/json",
			body: `{"choice":"maybe","reason":"x"}`, status: 400, code: "invalid_input", runID: stuck[0].Id, audited: true},
		{name: "resolve without a reason", method: "POST", path: "/v1/runs/" + stuck[0].Id + "/resolve", token: tokOps, ctype: "application/json",
			body: `{"choice":"abandon","reason":" "}`, status: 400, code: "invalid_input", fields: []string{"reason"}},
		{name: "cancel without a reason", method: "POST", path: "/v1/runs/" + first.Id + "/cancel", token: tokAll, ctype: "application/json",
			body: `{"reason":""}`, status: 400, code: "invalid_input", fields: []string{"reason"}},
		{name: "cancel with an unknown field", method: "POST", path: "/v1/runs/" + first.Id + "/cancel", token: tokAll, ctype: "application/json",
			body: `{"reason":"x","force":true}`, status: 400, code: "invalid_input"},
		{name: "a limit out of range", method: "GET", path: "/v1/runs?limit=0", token: tokAll, status: 400, code: "invalid_input", fields: []string{"limit"}},
		{name: "a limit too large", method: "GET", path: "/v1/runs?limit=10000", token: tokAll, status: 400, code: "invalid_input", fields: []string{"limit"}},
		{name: "a limit that is not a number", method: "GET", path: "/v1/runs?limit=ten", token: tokAll, status: 400, code: "invalid_input"},
		{name: "an unknown status", method: "GET", path: "/v1/runs?status=done,bogus", token: tokAll, status: 400, code: "invalid_input", fields: []string{"status"}},
		{name: "a forged cursor", method: "GET", path: "/v1/runs?cursor=eyJpZCI6MX0", token: tokAll, status: 400, code: "invalid_cursor"},
		{name: "a cursor that is not base64url", method: "GET", path: "/v1/runs?cursor=%3Cscript%3E", token: tokAll, status: 400, code: "invalid_cursor"},
		{name: "a cursor of the form before filters were bound", method: "GET", path: "/v1/runs?cursor=MToxNzY0NTA0MDAwMDAwOnJ1bl8x", token: tokAll, status: 400, code: "invalid_cursor"},
		{name: "a wait too long", method: "GET", path: "/v1/runs/" + first.Id + "/wait?timeout=999", token: tokAll, status: 400, code: "invalid_input", fields: []string{"timeout"}},
		{name: "an unknown route", method: "GET", path: "/v1/approvals", token: tokAll, status: 404, code: "not_found"},
		{name: "an unknown method", method: "DELETE", path: "/v1/runs/" + first.Id, token: tokAll, status: 405, code: "method_not_allowed"},
	}
	for _, tc := range refusals {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			before := h.snapshot()
			a := h.do(tc.method, tc.path, tc.token, tc.ctype, []byte(tc.body), true)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			p := a.problem(t)
			if p.Code != tc.code || p.Status != tc.status || p.Type == "" || p.Title == "" {
				t.Errorf("problem %s, want code %s", a.body, tc.code)
			}
			if got := deref(p.RunId); got != tc.runID {
				t.Errorf("run_id %q, want %q", got, tc.runID)
			}
			var fields []string
			if p.Errors != nil {
				for _, f := range *p.Errors {
					fields = append(fields, f.Field)
				}
			}
			if !slices.Equal(fields, tc.fields) {
				t.Errorf("errors name %v, want %v: %s", fields, tc.fields, a.body)
			}
			if tc.check != nil {
				tc.check(t, a)
			}
			after := h.snapshot()
			if tc.audited {
				if after.Audit != before.Audit+1 {
					t.Errorf("audit %d → %d, want the refusal recorded", before.Audit, after.Audit)
				}
				after.Audit = before.Audit
			}
			if after.json(t) != before.json(t) {
				t.Errorf("the refusal changed the store:\nbefore %s\nafter  %s", before.json(t), after.json(t))
			}
		})
	}

	t.Run("the client returns a refusal as *client.Error", func(t *testing.T) {
		_, err := h.client(tokRead).Submit(ctx, deployProposal("k2", "1.0.0"))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != "insufficient_scope" || ce.Status != 403 {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("wait returns at once when the run already left the status, and at the timeout otherwise", func(t *testing.T) {
		w, err := c.Wait(ctx, done.Id, 5*time.Second, record.StatusWaitingApproval)
		if err != nil || !w.Changed || w.Run.Status != record.StatusDone {
			t.Fatalf("wait = %+v, %v", w, err)
		}
		w, err = c.Wait(ctx, first.Id, 0, "")
		if err != nil || w.Changed || w.Run.Status != record.StatusWaitingApproval {
			t.Fatalf("wait = %+v, %v", w, err)
		}
	})

	t.Run("wait wakes on a decision", func(t *testing.T) {
		s, err := c.Submit(ctx, deployProposal("k-wait", "2.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			w   *api.WaitResult
			err error
		}
		got := make(chan result, 1)
		go func() {
			w, err := c.Wait(ctx, s.Id, 60*time.Second, "")
			got <- result{w, err}
		}()
		// Decide only once the wait is asleep on the run, so that it is the
		// wake that answers, not the first read.
		for h.engine.Changes().Waiting() == 0 {
			runtime.Gosched()
		}
		start := time.Now()
		if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: s.Id, Approver: record.Person{ID: "U0LEAD"},
			Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil || !r.w.Changed || r.w.Run.Status == record.StatusWaitingApproval {
			t.Fatalf("wait = %+v, %v", r.w, r.err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the wait answered %v after the decision", d)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		s, err := c.Submit(ctx, deployProposal("k-cancel", "3.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Cancel(ctx, s.Id, "not needed after all")
		if err != nil || v.Status != record.StatusCancelled {
			t.Fatalf("cancel = %+v, %v", v, err)
		}
		if !strings.Contains(v.Reason, "agent:resolver") {
			t.Errorf("reason %q should name who cancelled", v.Reason)
		}
	})

	t.Run("resolve", func(t *testing.T) {
		a := h.do("POST", "/v1/runs/"+stuck[1].Id+"/resolve", tokOps, "application/json",
			[]byte(`{"choice":"happened","reason":"the ledger has it","receipt":{"id":"W-1","amount":9007199254740993}}`), false)
		var v workflow.RunView
		if err := json.Unmarshal(a.body, &v); a.status != 200 || err != nil {
			t.Fatalf("resolve = %d %s (%v)", a.status, a.body, err)
		}
		if v.Status != record.StatusDone || len(v.Resolutions) != 1 || v.Resolutions[0].By != "U0LEAD" || v.Resolutions[0].Choice != record.ResolveHappened {
			t.Fatalf("resolved run: %s, resolutions %+v", v.Status, v.Resolutions)
		}
		if !strings.Contains(string(v.Operations[0].Receipt), "9007199254740993") {
			t.Errorf("the receipt given lost its exact number: %s", v.Operations[0].Receipt)
		}
	})

	t.Run("list", func(t *testing.T) {
		l, err := c.List(ctx, client.ListOptions{Statuses: []record.Status{record.StatusDone}})
		if err != nil || len(l.Runs) == 0 || l.Runs[0].ID != done.Id || l.NextCursor != nil {
			t.Fatalf("list = %+v, %v", l, err)
		}
		for _, r := range l.Runs {
			if r.Status != record.StatusDone {
				t.Errorf("run %s is %s", r.ID, r.Status)
			}
		}
	})

	t.Run("break-glass: force, the pending reviews, acknowledge", func(t *testing.T) { exerciseBreakGlass(t, h) })

	t.Run("the document", func(t *testing.T) {
		a := h.do("GET", "/v1/openapi.yaml", "", "", nil, false)
		if a.status != 200 || string(a.body) != string(api.Spec) {
			t.Fatalf("openapi.yaml: %d", a.status)
		}
	})

	// Last: after Stop, every wait answers at once.
	t.Run("a wait in progress answers when the server stops", func(t *testing.T) {
		got := make(chan error, 1)
		var w *api.WaitResult
		go func() {
			var err error
			w, err = c.Wait(ctx, first.Id, 120*time.Second, "")
			got <- err
		}()
		for h.engine.Changes().Waiting() == 0 {
			runtime.Gosched()
		}
		h.api.Stop()
		if err := <-got; err != nil || w.Changed || w.Run.Status != record.StatusWaitingApproval {
			t.Fatalf("wait = %+v, %v", w, err)
		}
	})

	t.Run("every operation was run, answering and refusing", func(t *testing.T) {
		doc := loadDoc(t)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				seen := h.conf.seen[op.OperationID]
				ok := slices.ContainsFunc(seen, func(s int) bool { return s < 300 })
				refused := slices.ContainsFunc(seen, func(s int) bool { return s >= 400 })
				if !ok || (!refused && op.OperationID != "getOpenAPI") {
					t.Errorf("%s %s (%s): statuses seen %v, want an answer and a refusal", method, path, op.OperationID, seen)
				}
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestListPages walks a list page by page: every run once, in order, the
// filters keep what they say, and a token lists only its requester's runs.
func TestListPages(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c, other := h.client(tokAll), h.client(tokOther)
	// Runs 0, 3 and 6 are agent:other's; tasks and statuses cut across
	// requesters.
	var all []string
	for i := range 7 {
		cl, task := c, "T-a"
		if i%3 == 0 {
			cl = other
		}
		if i%4 < 2 {
			task = "T-b"
		}
		p := &workflow.Proposal{TaskID: task, Actions: []record.Action{{Name: "note", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}}
		if i%2 == 0 {
			p = deployProposal("", "1.0."+fmt.Sprint(i))
			p.TaskID = task
		}
		s, err := cl.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s.Id)
	}
	walk := func(cl *client.Client, o client.ListOptions) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("the cursor does not move")
			}
			l, err := cl.List(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range l.Runs {
				ids = append(ids, r.ID)
			}
			if l.NextCursor == nil {
				return ids
			}
			if len(l.Runs) != o.Limit {
				t.Fatalf("a page of %d before the end, want %d", len(l.Runs), o.Limit)
			}
			o.Cursor = *l.NextCursor
		}
	}
	keep := func(f func(i int) bool) []string {
		var out []string
		for i, id := range all {
			if f(i) {
				out = append(out, id)
			}
		}
		return out
	}
	mine := func(i int) bool { return i%3 != 0 }
	theirs := func(i int) bool { return i%3 == 0 }
	tests := []struct {
		name string
		cl   *client.Client
		o    client.ListOptions
		want []string
	}{
		{"everything of the token's requester, three a page", c, client.ListOptions{Limit: 3}, keep(mine)},
		{"everything of the token's requester, one page", c, client.ListOptions{Limit: 200}, keep(mine)},
		{"everything of the other requester", other, client.ListOptions{Limit: 2}, keep(theirs)},
		{"waiting", c, client.ListOptions{Limit: 2, Statuses: []record.Status{record.StatusWaitingApproval}},
			keep(func(i int) bool { return mine(i) && i%2 == 0 })},
		{"a task", c, client.ListOptions{Limit: 1, TaskID: "T-b"}, keep(func(i int) bool { return mine(i) && i%4 < 2 })},
		{"a task, the other requester", other, client.ListOptions{Limit: 1, TaskID: "T-b"}, keep(func(i int) bool { return theirs(i) && i%4 < 2 })},
		{"the token's requester named", c, client.ListOptions{Limit: 2, Requester: "agent:resolver"}, keep(mine)},
		{"a requester and a status", other, client.ListOptions{Limit: 1, Requester: "agent:other", Statuses: []record.Status{record.StatusDone}},
			keep(func(i int) bool { return theirs(i) && i%2 == 1 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := walk(tt.cl, tt.o); !slices.Equal(got, tt.want) {
				t.Errorf("walked %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("statuses as a comma list and repeated", func(t *testing.T) {
		for _, q := range []string{"status=done,waiting_approval", "status=done&status=WAITING_APPROVAL"} {
			a := h.do("GET", "/v1/runs?"+q, tokAll, "", nil, false)
			var l api.RunList
			if err := json.Unmarshal(a.body, &l); err != nil || len(l.Runs) != len(keep(mine)) {
				t.Errorf("%s: %d runs (%v): %s", q, len(l.Runs), err, a.body)
			}
		}
	})
	t.Run("a cursor goes only with the filter it was made for", func(t *testing.T) {
		l, err := c.List(ctx, client.ListOptions{Limit: 1, Statuses: []record.Status{record.StatusDone, record.StatusWaitingApproval}})
		if err != nil || l.NextCursor == nil {
			t.Fatalf("list = %+v, %v", l, err)
		}
		cur := url.QueryEscape(*l.NextCursor)
		ok := []string{
			"status=waiting_approval,done&limit=1&cursor=" + cur, // the same statuses in another order
			"status=done&status=done,waiting_approval&limit=5&cursor=" + cur,
			"status=done,waiting_approval&requester=agent:resolver&cursor=" + cur, // the requester it stood for, named
		}
		for _, q := range ok {
			if a := h.do("GET", "/v1/runs?"+q, tokAll, "", nil, false); a.status != 200 {
				t.Errorf("%s: %d %s", q, a.status, a.body)
			}
		}
		refused := []struct{ token, query string }{
			{tokAll, "cursor=" + cur},
			{tokAll, "status=done&cursor=" + cur},
			{tokAll, "status=done,waiting_approval&task_id=T-a&cursor=" + cur},
			{tokOther, "status=done,waiting_approval&cursor=" + cur}, // another token's
		}
		for _, r := range refused {
			before := h.snapshot()
			a := h.do("GET", "/v1/runs?"+r.query, r.token, "", nil, false)
			if a.status != 400 {
				t.Fatalf("%s: %d %s", r.query, a.status, a.body)
			}
			if p := a.problem(t); p.Code != "invalid_cursor" || !strings.Contains(deref(p.Detail), "another filter") {
				t.Errorf("%s: %s", r.query, a.body)
			}
			if after := h.snapshot(); after.json(t) != before.json(t) {
				t.Errorf("%s changed the store", r.query)
			}
		}
	})
}

// TestRateLimit: a token's bucket empties, the answer says when to come
// back, and it refills on the limiter's clock; other tokens are not held up.
func TestRateLimit(t *testing.T) {
	h := newHarness(t, harnessOpts{rate: 0.1, burst: 1})
	if a := h.do("GET", "/v1/runs", tokAll, "", nil, false); a.status != 200 {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	before := h.snapshot()
	a := h.do("GET", "/v1/runs", tokAll, "", nil, false)
	if a.status != 429 || a.problem(t).Code != "rate_limited" || a.header.Get("Retry-After") != "10" {
		t.Fatalf("second call: %d Retry-After %q %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	if after := h.snapshot(); after.json(t) != before.json(t) {
		t.Error("a limited call changed the store")
	}
	if a := h.do("GET", "/v1/runs", tokOther, "", nil, false); a.status != 200 {
		t.Errorf("another token: %d", a.status)
	}
	h.clock.Advance(9500 * time.Millisecond)
	if a := h.do("GET", "/v1/runs", tokAll, "", nil, false); a.status != 429 || a.header.Get("Retry-After") != "1" {
		t.Errorf("half a second early: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	h.clock.Advance(500 * time.Millisecond)
	if a := h.do("GET", "/v1/runs", tokAll, "", nil, false); a.status != 200 {
		t.Errorf("after Retry-After: %d %s", a.status, a.body)
	}
}

// TestScopesMatchTheDocument holds the server's scope table to each
// operation's x-signoff-scope.
func TestScopesMatchTheDocument(t *testing.T) {
	doc := loadDoc(t)
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			n++
			route := method + " /v1" + strings.ReplaceAll(strings.ReplaceAll(path, "{", ":"), "}", "")
			want, _ := op.Extensions["x-signoff-scope"].(string)
			got, ok := api.Scopes[route]
			if !ok || got != want {
				t.Errorf("%s: server scope %q (known %v), document %q", route, got, ok, want)
			}
		}
	}
	if n != len(api.Scopes) {
		t.Errorf("the document has %d operations, the server's scope table %d", n, len(api.Scopes))
	}
}

// TestConformanceCatchesWhatTheDocumentLacks: the check TestAPI relies on
// refuses an answer with an undocumented field, an undocumented status or a
// value of the wrong type.
func TestConformanceCatchesWhatTheDocumentLacks(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	s, err := h.client(tokAll).Submit(context.Background(), deployProposal("", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	a := h.do("GET", "/v1/runs/"+s.Id, tokAll, "", nil, false)
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/runs/"+s.Id, nil)
	if _, errs := h.conf.check(req, nil, a.status, a.header, a.body, true); len(errs) != 0 {
		t.Fatalf("the real answer fails: %v", errs)
	}
	var run map[string]any
	if err := json.Unmarshal(a.body, &run); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		status int
		edit   func(m map[string]any)
	}{
		{"an undocumented field", 200, func(m map[string]any) { m["callback_secret"] = "x" }},
		{"an undocumented nested field", 200, func(m map[string]any) { m["requester"].(map[string]any)["role"] = "agent" }},
		{"a status outside the enum", 200, func(m map[string]any) { m["status"] = "paused" }},
		{"a missing required field", 200, func(m map[string]any) { delete(m, "actions") }},
		{"an undocumented status code", 202, func(map[string]any) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]any{}
			_ = json.Unmarshal(a.body, &m)
			tt.edit(m)
			b, _ := json.Marshal(m)
			if _, errs := h.conf.check(req, nil, tt.status, a.header, b, true); len(errs) == 0 {
				t.Errorf("the check took it")
			}
		})
	}
}

// TestATokenSeesOnlyItsRequestersRuns: two tokens of two requesters each
// get, wait on, list and cancel their own runs only. The other's run is
// answered exactly as a run that does not exist, and the refused calls
// change nothing.
func TestATokenSeesOnlyItsRequestersRuns(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	type agent struct {
		name, token, requester string
		runs                   []string // a waiting run, then a finished one
	}
	agents := []*agent{{name: "resolver", token: tokAll, requester: "agent:resolver"}, {name: "other", token: tokOther, requester: "agent:other"}}
	for _, a := range agents {
		c := h.client(a.token)
		w, err := c.Submit(ctx, deployProposal("k-"+a.name, "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Submit(ctx, &workflow.Proposal{Actions: []record.Action{{Name: "note", Args: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		a.runs = []string{w.Id, d.Id}
	}
	// same says whether two answers are the same once the run ids they
	// name are taken out.
	same := func(a answer, id string, b answer, otherID string) bool {
		return a.status == b.status && a.header.Get("Content-Type") == b.header.Get("Content-Type") &&
			strings.ReplaceAll(string(a.body), id, "ID") == strings.ReplaceAll(string(b.body), otherID, "ID")
	}
	const unknown = "run_01a22eddf40c000a59e01d7a"
	cancel := []byte(`{"reason":"not yours"}`)
	for i, a := range agents {
		theirs := agents[1-i]
		t.Run(a.name, func(t *testing.T) {
			for _, id := range a.runs {
				if got := h.do("GET", "/v1/runs/"+id, a.token, "", nil, false); got.status != 200 {
					t.Errorf("its own run: %d %s", got.status, got.body)
				}
				if got := h.do("GET", "/v1/runs/"+id+"/wait?timeout=0", a.token, "", nil, false); got.status != 200 {
					t.Errorf("waiting on its own run: %d %s", got.status, got.body)
				}
			}
			refusals := []struct{ name, method, path string }{
				{"get", "GET", "/v1/runs/{id}"},
				{"wait", "GET", "/v1/runs/{id}/wait?timeout=0"},
				{"wait from a status", "GET", "/v1/runs/{id}/wait?timeout=0&status=waiting_approval"},
				{"cancel", "POST", "/v1/runs/{id}/cancel"},
			}
			for _, r := range refusals {
				for _, id := range theirs.runs {
					before := h.snapshot()
					var body []byte
					ctype := ""
					if r.method == "POST" {
						body, ctype = cancel, "application/json"
					}
					got := h.do(r.method, strings.ReplaceAll(r.path, "{id}", id), a.token, ctype, body, false)
					if after := h.snapshot(); after.json(t) != before.json(t) {
						t.Errorf("%s of the other's run %s changed the store:\nbefore %s\nafter  %s", r.name, id, before.json(t), after.json(t))
					}
					none := h.do(r.method, strings.ReplaceAll(r.path, "{id}", unknown), a.token, ctype, body, false)
					if got.status != 404 || got.problem(t).Code != "unknown_run" || !same(got, id, none, unknown) {
						t.Errorf("%s of the other's run %s answered\n%d %s\nwhere a run that does not exist answers\n%d %s",
							r.name, id, got.status, got.body, none.status, none.body)
					}
				}
			}
			l, err := h.client(a.token).List(ctx, client.ListOptions{Limit: 200})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range l.Runs {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, a.runs) {
				t.Errorf("the list holds %v, want its own %v", ids, a.runs)
			}
			before := h.snapshot()
			got := h.do("GET", "/v1/runs?requester="+url.QueryEscape(theirs.requester), a.token, "", nil, false)
			if p := got.problem(t); got.status != 403 || p.Code != "requester_mismatch" || !strings.Contains(deref(p.Detail), a.requester) {
				t.Errorf("listing the other's runs: %d %s", got.status, got.body)
			}
			if after := h.snapshot(); after.json(t) != before.json(t) {
				t.Error("listing the other's runs changed the store")
			}
		})
	}
	t.Run("the runs are as they were, and their own token still cancels them", func(t *testing.T) {
		for _, a := range agents {
			v, err := h.engine.Get(ctx, a.runs[0])
			if err != nil || v.Status != record.StatusWaitingApproval {
				t.Fatalf("run %s: %+v, %v", a.runs[0], v, err)
			}
			r, err := h.client(a.token).Cancel(ctx, a.runs[0], "done with it")
			if err != nil || r.Status != record.StatusCancelled {
				t.Errorf("cancel of its own run: %+v, %v", r, err)
			}
		}
	})
}

// TestARunRowNamingAnotherRequesterShowsNothingOfTheRun: someone with the
// database moves another agent's run to this token's requester. The row is
// not sealed, so signoff checks it against the sealed checkpoints: the run
// is reported damaged, and the token sees neither its arguments nor its
// summary nor its reason.
func TestARunRowNamingAnotherRequesterShowsNothingOfTheRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	theirs, err := h.client(tokOther).Submit(context.Background(), deployProposal("k-theirs", "7.7.7"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET requester_id = 'agent:resolver' WHERE id = ?`, theirs.Id); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{"/v1/runs/" + theirs.Id, "/v1/runs"} {
		a := h.do("GET", path, tokAll, "", nil, false)
		if a.status != 200 {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		if body := string(a.body); strings.Contains(body, "7.7.7") || strings.Contains(body, "deploy api") {
			t.Errorf("GET %s shows the other agent's run:\n%s", path, body)
		}
		if path != "/v1/runs" && !strings.Contains(string(a.body), `"problem"`) {
			t.Errorf("GET %s does not say the run is damaged:\n%s", path, a.body)
		}
	}
}

// TestAnIdempotencyKeyIsItsRequesters: an agent that sends, first, the key
// another agent will use does not lock that agent out: each gets a run of its
// own under the key (201), and each one's retry is a replay of its own run.
func TestAnIdempotencyKeyIsItsRequesters(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	body := []byte(mustJSON(t, deployProposal("deploy-api-1.4.2", "1.4.2")))
	ids := map[string]string{}
	for _, tok := range []string{tokOther, tokAll} {
		a := h.do("POST", "/v1/runs", tok, "application/json", body, false)
		var res api.SubmitResult
		if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusCreated || res.Replayed {
			t.Fatalf("%s's first submit under the key: %d %s (%v), want 201 and a new run", tok, a.status, a.body, err)
		}
		ids[tok] = res.Id
	}
	if ids[tokOther] == ids[tokAll] {
		t.Fatalf("two requesters' submits under one key share run %s", ids[tokAll])
	}
	for tok, id := range ids {
		a := h.do("POST", "/v1/runs", tok, "application/json", body, false)
		var res api.SubmitResult
		if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusOK || !res.Replayed || res.Id != id {
			t.Errorf("%s's retry: %d %s (%v), want 200, a replay of %s", tok, a.status, a.body, err, id)
		}
	}
}

// TestCursorsAreSealed: a cursor is taken only as the API gave it out. One of
// the right shape that it never gave out (sealed with another key, its seal
// or position changed, or unsealed as cursors were before) is 400
// invalid_cursor and changes nothing. A replica or a restarted server with the
// same keys takes it, also while a new key is rotated in; one with other keys
// does not.
func TestCursorsAreSealed(t *testing.T) {
	key := []byte("cursor key one, 32 bytes or more")
	next := []byte("cursor key two, 32 bytes or more")
	h := newHarness(t, harnessOpts{cursorKeys: [][]byte{key}})
	ctx := context.Background()
	c := h.client(tokAll)
	var ids []string
	for i := range 3 {
		s, err := c.Submit(ctx, &workflow.Proposal{Actions: []record.Action{{Name: "note", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.Id)
	}
	page, err := c.List(ctx, client.ListOptions{Limit: 1})
	if err != nil || page.NextCursor == nil || len(page.Runs) != 1 || page.Runs[0].ID != ids[0] {
		t.Fatalf("first page %+v, %v", page, err)
	}
	real := *page.NextCursor
	raw, err := base64.RawURLEncoding.DecodeString(real)
	if err != nil {
		t.Fatal(err)
	}
	// version:created:filter:seal:id
	f := strings.SplitN(string(raw), ":", 5)
	if len(f) != 5 || f[4] != ids[0] {
		t.Fatalf("the cursor reads %q", raw)
	}
	enc := func(fields ...string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields, ":")))
	}
	flipped := []byte(f[3])
	if flipped[0] = '0'; f[3][0] == '0' {
		flipped[0] = '1'
	}
	ms, _ := strconv.ParseInt(f[1], 10, 64)
	forged := []struct{ name, cursor string }{
		{"sealed with a key the server does not hold", api.EncodeCursor([][]byte{next}, time.UnixMilli(ms), storage.RunFilter{RequesterID: "agent:resolver"}, ids[0])},
		{"its seal changed", enc(f[0], f[1], f[2], string(flipped), f[4])},
		{"another run's position under its seal", enc(f[0], f[1], f[2], f[3], ids[1])},
		{"another time under its seal", enc(f[0], strconv.FormatInt(ms+1, 10), f[2], f[3], f[4])},
		{"without its seal, as cursors were before", enc("2", f[1], f[2], f[4])},
		{"of the right shape with a made-up seal", enc(f[0], f[1], f[2], strings.Repeat("0", 32), f[4])},
	}
	for _, tt := range forged {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			before := h.snapshot()
			a := h.do("GET", "/v1/runs?limit=1&cursor="+url.QueryEscape(tt.cursor), tokAll, "", nil, false)
			if a.status != http.StatusBadRequest || a.problem(t).Code != "invalid_cursor" || !strings.Contains(deref(a.problem(t).Detail), "not a cursor this API gave out") {
				t.Errorf("answered %d %s, want 400 invalid_cursor", a.status, a.body)
			}
			if after := h.snapshot(); after.json(t) != before.json(t) {
				t.Errorf("a refused list changed the store")
			}
		})
	}
	for _, r := range []struct {
		name string
		keys [][]byte
		ok   bool
	}{
		{"the server itself", nil, true},
		{"a replica with the same key", [][]byte{key}, true},
		{"a replica sealing with a new key, the old one still opening", [][]byte{next, key}, true},
		{"a replica without the key", [][]byte{next}, false},
		{"a server with a key of its own process", nil, false},
	} {
		t.Run(r.name, func(t *testing.T) {
			cl := c
			if r.name != "the server itself" {
				cl = h.replica(r.keys)
			}
			l, err := cl.List(ctx, client.ListOptions{Limit: 1, Cursor: real})
			var ce *client.Error
			switch {
			case r.ok && (err != nil || len(l.Runs) != 1 || l.Runs[0].ID != ids[1]):
				t.Errorf("the next page: %+v, %v; want %s", l, err, ids[1])
			case !r.ok && (!errors.As(err, &ce) || ce.Code != "invalid_cursor"):
				t.Errorf("the next page: %+v, %v; want invalid_cursor", l, err)
			}
		})
	}
}

// TestARedactedFieldIsHiddenWhereverTheRunShowsIt: a run whose target echoed
// its arguments, nested, in the receipt is read through the API with the
// redact: field's value nowhere: not in the arguments, not in the echo.
func TestARedactedFieldIsHiddenWhereverTheRunShowsIt(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	p := deployProposal("", "1.2.3")
	p.Requester = record.Person{ID: "agent:resolver"}
	run, err := h.engine.Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: run.ID, Approver: record.Person{ID: "U0LEAD"},
		Verdict: record.VerdictApprove, Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	a := h.do("GET", "/v1/runs/"+run.ID, tokAll, "", nil, false)
	var v workflow.RunView
	if err := json.Unmarshal(a.body, &v); a.status != 200 || err != nil || len(v.Operations) != 1 {
		t.Fatalf("GET = %d %s (%v)", a.status, a.body, err)
	}
	if strings.Contains(string(a.body), "s3cret") || !strings.Contains(string(v.Operations[0].Receipt), `"token":"[redacted]"`) {
		t.Errorf("the API shows the token:\n%s", a.body)
	}
}
