package workflow_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/signoff-dev/signoff/workflow"
)

// TestCallbackURLRefusedBeforeAnythingIsWritten: a callback_url that is not a
// plain http(s) URL under an allowed prefix is refused at submit, with a
// message that says what is allowed, and the store is left as it was.
func TestCallbackURLRefusedBeforeAnythingIsWritten(t *testing.T) {
	tests := []struct {
		name, url, code, says string
		opts                  []harnessOption
	}{
		{"outside the allow-list", "https://evil.example/signoff/events", workflow.CodeCallbackNotAllowed, "https://agent.example/signoff/", []harnessOption{allowCallbacks}},
		{"a longer host", "https://agent.example.evil/signoff/events", workflow.CodeCallbackNotAllowed, "must start with one of", []harnessOption{allowCallbacks}},
		{"no allow-list", goodCallback, workflow.CodeCallbackNotAllowed, "allows no callbacks", nil},
		{"user and password", "https://me:pw@agent.example/signoff/events", workflow.CodeInvalidInput, "user or password", []harnessOption{allowCallbacks}},
		{"relative", "/signoff/events", workflow.CodeInvalidInput, "absolute http(s) URL", []harnessOption{allowCallbacks}},
		{"another scheme", "ftp://agent.example/signoff/events", workflow.CodeInvalidInput, "absolute http(s) URL", []harnessOption{allowCallbacks}},
		{"two lines", goodCallback + "\nhttps://evil.example/", workflow.CodeInvalidInput, "callback_url", []harnessOption{allowCallbacks}},
		{"a space", goodCallback + " x", workflow.CodeInvalidInput, "spaces", []harnessOption{allowCallbacks}},
		{"too long", goodCallback + "?" + strings.Repeat("a", 3000), workflow.CodeInvalidInput, "at most", []harnessOption{allowCallbacks}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts...)
			before := h.auditCount("")
			p := refund("PAY-1", 119)
			p.CallbackURL = tt.url
			_, err := h.engine.Submit(ctx, p)
			r := wantRefused(t, err, tt.code)
			if !strings.Contains(r.Msg, tt.says) {
				t.Errorf("message %q does not say %q", r.Msg, tt.says)
			}
			runs, lerr := h.engine.List(ctx, workflow.RunFilter{})
			if lerr != nil || len(runs) != 0 || h.auditCount("") != before {
				t.Fatalf("a refused submit wrote: %d runs (%v), audit %d → %d", len(runs), lerr, before, h.auditCount(""))
			}
		})
	}
}

// TestCallbackURLIsBoundByTheIdempotencyKey: where the outcome goes is part of
// what was asked, so a retry naming another URL is another proposal.
func TestCallbackURLIsBoundByTheIdempotencyKey(t *testing.T) {
	h := newHarness(t, allowCallbacks)
	p := refund("PAY-1", 119)
	p.IdempotencyKey, p.CallbackURL = "ticket-T-1", goodCallback
	first := h.submit(p)
	if v := h.get(first.ID); v.CallbackURL != goodCallback {
		t.Fatalf("the run shows callback_url %q", v.CallbackURL)
	}
	same := refund("PAY-1", 119)
	same.IdempotencyKey, same.CallbackURL = "ticket-T-1", goodCallback
	if run, err := h.engine.Submit(ctx, same); err != nil || run.ID != first.ID {
		t.Fatalf("retry: %v, %v; want run %s", run, err, first.ID)
	}
	for _, url := range []string{goodCallback + "2", ""} {
		other := refund("PAY-1", 119)
		other.IdempotencyKey, other.CallbackURL = "ticket-T-1", url
		_, err := h.engine.Submit(ctx, other)
		if r := wantRefused(t, err, workflow.CodeIdempotencyKeyReused); r.RunID != first.ID {
			t.Fatalf("callback %q: refusal names %q, want %s", url, r.RunID, first.ID)
		}
	}
}

// TestForkDoesNotInheritTheCallback: a person forks; the agent asked for
// events about its own run only.
func TestForkDoesNotInheritTheCallback(t *testing.T) {
	h := newHarness(t, allowCallbacks)
	p := refund("PAY-1", 119)
	p.CallbackURL = goodCallback
	run := h.submit(p)
	fork, err := h.engine.Fork(ctx, run.ID, 1, workflow.Person{ID: "U0LEAD0001"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.CallbackURL != "" || h.get(fork.ID).CallbackURL != "" {
		t.Fatalf("the fork kept the callback %q", fork.CallbackURL)
	}
	if rep, err := h.engine.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// FuzzCallbackURL: whatever an agent puts in callback_url, a run is made only
// for a plain http(s) URL under an allowed prefix, without credentials and on
// one line; anything else is refused as input or as not allowed.
func FuzzCallbackURL(f *testing.F) {
	for _, s := range []string{goodCallback, "https://agent.example/signoff/../x", "https://u:p@agent.example/signoff/x",
		"https://agent.example/signoff/\u202ex", "https://agent.example/signoff/%0a", "https://agent.example/signoff/x#frag",
		"https://agent.example/signoffx", "http://agent.example/signoff/x", "https://agent.example/signoff/\x00"} {
		f.Add(s)
	}
	h := newHarness(f, allowCallbacks)
	f.Fuzz(func(t *testing.T, u string) {
		p := refund("PAY-2", 1)
		p.CallbackURL = u
		run, err := h.engine.Submit(ctx, p)
		if err != nil {
			var r *workflow.RefusedError
			if !errors.As(err, &r) || (r.Code != workflow.CodeInvalidInput && r.Code != workflow.CodeCallbackNotAllowed) {
				t.Fatalf("%q: %v", u, err)
			}
			return
		}
		if u == "" {
			if run.CallbackURL != "" {
				t.Fatalf("no callback asked, run has %q", run.CallbackURL)
			}
			return
		}
		parsed, perr := url.Parse(u)
		if perr != nil || parsed.Scheme != "https" || parsed.User != nil || !strings.HasPrefix(u, "https://agent.example/signoff/") ||
			strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) || run.CallbackURL != u {
			t.Fatalf("accepted %q (run callback %q)", u, run.CallbackURL)
		}
	})
}
