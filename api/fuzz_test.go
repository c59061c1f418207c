package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/workflow"
)

// FuzzProposalBody: whatever the body, the decoder answers or refuses
// without panicking; what it takes is valid UTF-8 within the limit, and
// encodes back to a body it takes again, unchanged.
func FuzzProposalBody(f *testing.F) {
	for _, s := range []string{
		`{"actions":[{"name":"note","args":{}}]}`,
		`{"requester":{"id":"agent:a"},"actions":[{"name":"deploy","args":{"service":"api","version":"1.0.0"}}],"idempotency_key":"k"}`,
		`{"actions":[],"actions":[]}`, `{"actions":[{"name":"a"}]} {}`, "{\"summary\":\"\xff\"}", `{"x":1}`, ``, `null`, `[]`,
		`{"evidence":[{"source":"s","data":{"a":[1,2,{"b":null}]}}],"actions":[{"name":"n","args":{"a":1e400}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := api.BindProposal(body)
		if err != nil {
			if !record.IsRefused(err) {
				t.Fatalf("a bad body is refused as invalid input, got %T %v", err, err)
			}
			return
		}
		if !utf8.Valid(body) || len(body) > workflow.MaxProposalBytes {
			t.Fatalf("took a body that is not UTF-8 or too long (%d bytes)", len(body))
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		q, err := api.BindProposal(again)
		if err != nil {
			t.Fatalf("a proposal it took, re-encoded, is refused: %v\n%s", err, again)
		}
		if b, _ := json.Marshal(q); string(b) != string(again) {
			t.Fatalf("round trip changed the proposal:\n%s\n%s", again, b)
		}
	})
}

// FuzzCursor: a cursor is taken only in the one form the API gives out,
// sealed.
func FuzzCursor(f *testing.F) {
	f.Add(api.EncodeCursor([][]byte{api.TestCursorKey}, time.UnixMilli(1764504000000), storage.RunFilter{RequesterID: "agent:resolver"}, "run_1"))
	for _, s := range []string{"MjoxNzY0NTA0MDAwMDAwOjAxMjM0NTY3ODlhYmNkZWY6cnVuXzE", "MToxNzY0NTA0MDAwMDAwOnJ1bl8x", "", "eyJpZCI6MX0", "MTox", "MTotMTpy", "MTowMTpy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc, err := api.DecodeCursor(s)
		if err != nil {
			return
		}
		if enc != s {
			t.Fatalf("took %q, which encodes back as %q", s, enc)
		}
	})
}

// FuzzQueryParams: limit, status and timeout are taken only within their bounds.
func FuzzQueryParams(f *testing.F) {
	f.Add(50, "done,waiting_approval", "", 30)
	f.Add(0, "bogus", "x", -1)
	f.Add(201, "DONE, expired", "MToxOnI", 121)
	f.Fuzz(func(t *testing.T, limit int, status, cursor string, timeout int) {
		statuses := []string{status}
		fl, err := api.ListFilter(api.ListRunsParams{Limit: &limit, Status: &statuses, Cursor: &cursor}, "agent:resolver")
		if err == nil {
			if fl.Limit < 1 || fl.Limit > api.MaxLimit {
				t.Fatalf("took limit %d", fl.Limit)
			}
			for _, st := range fl.Statuses {
				if !st.Valid() {
					t.Fatalf("took status %q", st)
				}
			}
			if len(fl.Statuses) != len(strings.Split(status, ",")) {
				t.Fatalf("statuses %q became %v", status, fl.Statuses)
			}
		}
		d, err := api.WaitTimeout(&timeout)
		if err == nil && (d < 0 || d > api.MaxTimeout || d != time.Duration(timeout)*time.Second) {
			t.Fatalf("took timeout %d as %v", timeout, d)
		}
	})
}
