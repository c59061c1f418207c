package bearer

import (
	"crypto/sha256"
	"testing"
	"time"
)

func TestParseAndFind(t *testing.T) {
	tokens := []Token{{ID: "a", SHA256: sha256.Sum256([]byte("sk_a")), Requester: "agent:a", Scopes: []string{"read"}}}
	for _, c := range []struct {
		header string
		want   string // the token's id; "" when refused
	}{
		{"Bearer sk_a", "a"},
		{"bearer  sk_a ", "a"},
		{"Bearer sk_b", ""},
		{"Basic sk_a", ""},
		{"Bearer", ""},
		{"", ""},
	} {
		secret, ok := Parse(c.header)
		tok, found := Find(tokens, secret)
		if got := tok.ID; (ok && found) != (c.want != "") || got != c.want {
			t.Errorf("%q: token %q (parsed %v, found %v), want %q", c.header, got, ok, found, c.want)
		}
	}
	if !tokens[0].Has("read") || tokens[0].Has("submit") {
		t.Error("Has does not say the token's scopes")
	}
}

func TestLimiterIsPerToken(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := NewLimiter(1, 2, func() time.Time { return now })
	for i, want := range []bool{true, true, false} {
		if ok, _ := l.Allow("a"); ok != want {
			t.Fatalf("a's call %d: allowed %v, want %v", i+1, ok, want)
		}
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("b's first call refused: the buckets are shared")
	}
	now = now.Add(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("a's call a second later refused: the bucket does not refill")
	}
}
