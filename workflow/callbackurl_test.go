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
		{"outside the allow-list", "https://evil.example/signoff/events", record.CodeCallbackNotAllowed, "https://agent.example/signoff/", []harnessOption{allowCallbacks}},
		{"a longer host", "https://agent.example.evil/signoff/events", record.CodeCallbackNotAllowed, "must start with one of", []harnessOption{allowCallbacks}},
		{"no allow-list", goodCallback, record.CodeCallbackNotAllowed, "allows no callbacks", nil},
		{"user and password", "https://me:pw@agent.example/signoff/events", record.CodeInvalidInput, "user or password", []harnessOption{allowCallbacks}},
		{"relative", "/signoff/events", record.CodeInvalidInput, "absolute http(s) URL", []harnessOption{allowCallbacks}},
		{"another scheme", "ftp://agent.example/signoff/events", record.CodeInvalidInput, "absolute http(s) URL", []harnessOption{allowCallbacks}},
		{"two lines", goodCallback + "\nhttps://evil.example/", record.CodeInvalidInput, "callback_url", []harnessOption{allowCallbacks}},
		{"a space", goodCallback + " x", record.CodeInvalidInput, "spaces", []harnessOption{allowCallbacks}},
		{"too long", goodCallback + "?" + strings.Repeat("a", 3000), record.CodeInvalidInput, "at most", []harnessOption{allowCallbacks}},
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
			runs, lerr := h.engine.List(ctx, storage.RunFilter{})
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
		if r := wantRefused(t, err, record.CodeIdempotencyKeyReused); r.RunID != first.ID {
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
	fork, err := h.engine.Fork(ctx, run.ID, 1, record.Person{ID: "U0LEAD0001"})
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
		"https://agent.example/signoffx", "http://agent.example/signoff/x", "https://agent.example/signoff/\x00",
		"https://agent.example/signoff/%2e%2e/x", "https://agent.example/signoff/a/../x", "https://agent.example/signoff\\..\\x"} {
		f.Add(s)
	}
	h := newHarness(f, allowCallbacks)
	f.Fuzz(func(t *testing.T, u string) {
		p := refund("PAY-2", 1)
		p.CallbackURL = u
		run, err := h.engine.Submit(ctx, p)
		if err != nil {
			var r *record.RefusedError
			if !errors.As(err, &r) || (r.Code != record.CodeInvalidInput && r.Code != record.CodeCallbackNotAllowed) {
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
		canon, cerr := workflow.CanonicalCallbackURL(u)
		parsed, perr := url.Parse(canon)
		if cerr != nil || perr != nil || parsed.Scheme != "https" || parsed.User != nil || !strings.HasPrefix(canon, "https://agent.example/signoff/") ||
			strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) || run.CallbackURL != canon {
			t.Fatalf("accepted %q (run callback %q)", u, run.CallbackURL)
		}
	})
}

// TestCallbackURLIsMatchedAsAServerReadsIt: a callback_url is matched against
// the allow-list with its dot segments resolved, so "/signoff/../evil", which
// a server reads as "/evil", is not allowed; what a server could read in more
// than one way (encoded dots and slashes, backslashes, "..;") is refused
// outright, saying why. Nothing is written for either. A URL that stays under
// the prefix is stored, and so sent, resolved, and a retry written either way
// is the same proposal.
func TestCallbackURLIsMatchedAsAServerReadsIt(t *testing.T) {
	const base = "https://agent.example/signoff/"
	refusals := []struct{ name, url, code, says string }{
		{"dot segments out of the prefix", base + "../evil", record.CodeCallbackNotAllowed, "reads as https://agent.example/evil"},
		{"dot segments out of the prefix and back", base + "../signoffx/events", record.CodeCallbackNotAllowed, "reads as https://agent.example/signoffx/events"},
		{"a dot then two", base + "./../../evil", record.CodeCallbackNotAllowed, "reads as https://agent.example/evil"},
		{"encoded dots", base + "%2e%2e/evil", record.CodeInvalidInput, "a dot encoded as %2e"},
		{"encoded dots in capitals", base + "%2E%2E/evil", record.CodeInvalidInput, "a dot encoded as %2e"},
		{"one dot encoded", base + ".%2E/evil", record.CodeInvalidInput, "a dot encoded as %2e"},
		{"an encoded slash", base + "..%2fevil", record.CodeInvalidInput, "a slash encoded as %2f"},
		{"an encoded slash in capitals", base + "x%2F..%2F..%2Fevil", record.CodeInvalidInput, "a slash encoded as %2f"},
		{"an encoded backslash", base + "..%5cevil", record.CodeInvalidInput, "a backslash encoded as %5c"},
		{"doubly encoded dots", base + "%252e%252e/evil", record.CodeInvalidInput, "a percent sign encoded as %25"},
		{"a backslash", base + "..\\evil", record.CodeInvalidInput, "backslash"},
		{"backslashes only", "https://agent.example/signoff\\..\\..\\evil", record.CodeInvalidInput, "backslash"},
		{"a backslash and an encoded dot", base + "%2e.\\evil", record.CodeInvalidInput, "backslash"},
		{"a dot segment with parameters", base + "..;/evil", record.CodeInvalidInput, `dot segment "..;"`},
		{"full-width dots", base + "\uff0e\uff0e/evil", record.CodeInvalidInput, "full-width dot"},
		{"full-width dots, encoded", base + "%EF%BC%8E%EF%BC%8E/evil", record.CodeInvalidInput, "full-width dot"},
	}
	for _, tt := range refusals {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			h := newHarness(t, allowCallbacks)
			before := h.auditCount("")
			p := refund("PAY-1", 119)
			p.CallbackURL = tt.url
			_, err := h.engine.Submit(ctx, p)
			r := wantRefused(t, err, tt.code)
			if !strings.Contains(r.Msg, tt.says) {
				t.Errorf("message %q does not say %q", r.Msg, tt.says)
			}
			runs, lerr := h.engine.List(ctx, storage.RunFilter{})
			if lerr != nil || len(runs) != 0 || h.auditCount("") != before {
				t.Fatalf("a refused submit wrote: %d runs (%v), audit %d → %d", len(runs), lerr, before, h.auditCount(""))
			}
		})
	}
	accepted := []struct{ name, url, want string }{
		{"as written", goodCallback, goodCallback},
		{"a dot segment", base + "./events", goodCallback},
		{"dot segments inside the prefix", base + "v1/../events", goodCallback},
		{"a scheme in capitals", "HTTPS://agent.example/signoff/events", goodCallback},
		{"a query and a fragment kept", base + "a/../events?run=1#x", goodCallback + "?run=1#x"},
	}
	for _, tt := range accepted {
		t.Run("accepted: "+tt.name, func(t *testing.T) {
			h := newHarness(t, allowCallbacks)
			p := refund("PAY-1", 119)
			p.IdempotencyKey, p.CallbackURL = "ticket-T-1", tt.url
			run := h.submit(p)
			if run.CallbackURL != tt.want || h.get(run.ID).CallbackURL != tt.want {
				t.Fatalf("stored callback %q (shown %q), want %q", run.CallbackURL, h.get(run.ID).CallbackURL, tt.want)
			}
			again := refund("PAY-1", 119)
			again.IdempotencyKey, again.CallbackURL = "ticket-T-1", tt.want
			if r, err := h.engine.Submit(ctx, again); err != nil || r.ID != run.ID {
				t.Fatalf("a retry naming %q: %v, %v; want run %s", tt.want, r, err, run.ID)
			}
		})
	}
}

// FuzzCanonicalCallbackURL: the canonical form has no dot segments (as
// written, or once decoded any number of times), is its own canonical form,
// and a canonical URL under a prefix is under it however it is parsed or
// resolved afterwards.
func FuzzCanonicalCallbackURL(f *testing.F) {
	const prefix = "https://agent.example/signoff/"
	for _, s := range []string{goodCallback, prefix + "../evil", prefix + "%2e%2e/evil", prefix + "%2E./evil", prefix + "..%2fevil",
		prefix + "..\\evil", prefix + "%252e%252e/evil", prefix + "..;/evil", prefix + "a/./b/../../../c", prefix + "?x=/../y#/../z",
		prefix + "//..//evil", "https://agent.example/signoff", "HTTP://Agent.example/signoff/./x", prefix + "%25%32%65", prefix + "é/../x"} {
		f.Add(s)
	}
	base, _ := url.Parse(prefix)
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := workflow.CanonicalCallbackURL(raw)
		if err != nil {
			return
		}
		if again, err := workflow.CanonicalCallbackURL(c); err != nil || again != c {
			t.Fatalf("%q: canonical %q is not its own canonical form: %q, %v", raw, c, again, err)
		}
		u, err := url.Parse(c)
		if err != nil {
			t.Fatalf("%q: canonical %q does not parse: %v", raw, c, err)
		}
		// The path as written and each decoding of it hold no dot segment.
		paths := []string{u.EscapedPath()}
		for p := u.EscapedPath(); ; {
			d, err := url.PathUnescape(p)
			if err != nil || d == p {
				break
			}
			paths, p = append(paths, d), d
		}
		for _, p := range paths {
			for _, seg := range strings.Split(p, "/") {
				if seg == "." || seg == ".." || strings.ContainsRune(seg, '\\') {
					t.Fatalf("%q: canonical %q has the segment %q in %q", raw, c, seg, p)
				}
			}
		}
		if !strings.HasPrefix(c, prefix) {
			return
		}
		for _, read := range []*url.URL{u, base.ResolveReference(u), base.ResolveReference(&url.URL{Path: u.Path})} {
			if read.Scheme != "https" || read.Host != "agent.example" || !strings.HasPrefix(read.Path, "/signoff/") ||
				!strings.HasPrefix(read.String(), prefix) {
				t.Fatalf("%q: canonical %q is under %s, but reads as %s", raw, c, prefix, read)
			}
		}
	})
}
