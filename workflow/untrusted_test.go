package workflow_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/workflow"
)

func TestInert(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"LK-507862 refund 119.00 CAD", "LK-507862 refund 119.00 CAD"},
		{"Maëlle Tremblay — 東京 — مرحبا — ✓", "Maëlle Tremblay — 東京 — مرحبا — ✓"},
		{"\x1b[2Kfake", `\x1b[2Kfake`},
		{"a\nb\r\tc", `a\nb\r\tc`},
		{"bs\b del\x7f", `bs\x08 del\x7f`},
		{"\u202eabc\u202c", `\u202eabc\u202c`},
		{"\u2066x\u2069\u200e\u200f\u061c", `\u2066x\u2069\u200e\u200f\u061c`},
		{"z\u200bw\u200dj\u2060\ufeff", `z\u200bw\u200dj\u2060\ufeff`},
		{"c1\u0085\u009b", `c1\u0085\u009b`},
		{"sep\u2028\u2029", `sep\u2028\u2029`},
		{"fill\u3164", `fill\u3164`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"literal \\x1b stays", `literal \x1b stays`},
		{"", ""},
	} {
		if got := show.Inert(tc.in); got != tc.want {
			t.Errorf("Inert(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInertCorpus(t *testing.T) {
	for _, s := range texttest.Corpus(t) {
		got := show.Inert(s)
		if live := texttest.Live(got, false); live != "" {
			t.Errorf("Inert(%q) still has %s", s, live)
		}
	}
}

func FuzzInert(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[1A", "\u202e", "a\nb", "\xff", "👩‍💻"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := show.Inert(s)
		if live := texttest.Live(got, false); live != "" {
			t.Fatalf("Inert(%q) = %q has %s", s, got, live)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Inert(%q) = %q is not UTF-8", s, got)
		}
		printable := !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e })
		if printable && got != s {
			t.Fatalf("Inert(%q) = %q changed printable ASCII", s, got)
		}
		if show.Inert(got) != got {
			t.Fatalf("Inert is not idempotent on %q: %q then %q", s, got, show.Inert(got))
		}
	})
}

// TestSubmitRefusesDeceptiveSingleLineFields: ids and names are shown on one
// line everywhere, so a line break, a control or a bidi control in one is
// refused at submit, and a blank id too; nothing is written.
func TestSubmitRefusesDeceptiveSingleLineFields(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, want string
		edit       func(p *workflow.Proposal)
	}{
		{"newline in task id", "task_id must be one line", func(p *workflow.Proposal) { p.TaskID = "T-1\nrun_fake  waiting_approval" }},
		{"escape in requester name", "requester.name must not contain control characters (found \\x1b)", func(p *workflow.Proposal) { p.Requester.Name = "Res\x1b[2Kolver" }},
		{"bidi in requester id", "requester.id must not contain bidirectional controls (found \\u202e)", func(p *workflow.Proposal) { p.Requester.ID = "agent:\u202erevlos" }},
		{"blank requester id", "requester.id must not be blank", func(p *workflow.Proposal) { p.Requester.ID = "   " }},
		{"blank task id", "task_id must not be blank", func(p *workflow.Proposal) { p.TaskID = " \t" }},
		{"carriage return in idempotency key", "idempotency_key must be one line", func(p *workflow.Proposal) { p.IdempotencyKey = "k\r1" }},
		{"C1 in requester name", "requester.name must not contain control characters (found \\u0085)", func(p *workflow.Proposal) { p.Requester.Name = "a\u0085b" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := refund("PAY-1", 119)
			tc.edit(p)
			_, err := h.engine.Submit(context.Background(), p)
			r := wantRefused(t, err, record.CodeInvalidInput)
			if !strings.Contains(r.Msg, tc.want) {
				t.Errorf("refusal %q, want it to say %q", r.Msg, tc.want)
			}
		})
	}
	runs, err := h.engine.List(context.Background(), storage.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Fatalf("refused proposals left %d runs", len(runs))
	}
	// Names of every script, and multi-line summaries, are still welcome.
	p := refund("PAY-1", 119)
	p.Requester.Name = "Maëlle Tremblay (東京)"
	p.Summary = "line one\nline two"
	h.submit(p)
}
