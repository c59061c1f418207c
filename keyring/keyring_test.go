package keyring_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/keyring"
)

// TestDerivedKeys: a derived key is the same from the same ring, differs by
// purpose and by key, follows the ring's order (the sealing key first) and
// holds none of the ring's secrets; no ring derives none.
func TestDerivedKeys(t *testing.T) {
	const a = "ka:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE"
	const b = "kb:" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI"
	parse := func(text string) *keyring.Ring {
		t.Helper()
		r, err := keyring.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ab, ba := parse(a+"\n"+b+"\n"), parse(b+"\n"+a+"\n")
	d := ab.Derive("api-cursor")
	if len(d) != 2 || len(d[0]) < 32 || bytes.Equal(d[0], d[1]) {
		t.Fatalf("derived %x", d)
	}
	if again := parse(a + "\n" + b + "\n").Derive("api-cursor"); !bytes.Equal(again[0], d[0]) || !bytes.Equal(again[1], d[1]) {
		t.Error("the same ring derived other keys")
	}
	if r := ba.Derive("api-cursor"); !bytes.Equal(r[0], d[1]) || !bytes.Equal(r[1], d[0]) {
		t.Error("the derived keys do not follow the ring's order")
	}
	if o := ab.Derive("other"); bytes.Equal(o[0], d[0]) {
		t.Error("two purposes derived the same key")
	}
	if bytes.Contains(d[0], bytes.Repeat([]byte{'A'}, 8)) { // ka's secret is 32 bytes of A
		t.Error("a derived key holds the secret")
	}
	var none *keyring.Ring
	if none.Derive("api-cursor") != nil {
		t.Error("no ring derived keys")
	}
}

// TestKeyring: a generated key line parses, with an older key below it and
// comments and blank lines between; a ring that is empty, a line that is not
// ID:SECRET, a secret that is not base64 or too short, a bad id and an id
// used twice are refused, each saying so.
func TestKeyring(t *testing.T) {
	line, err := keyring.NewLine("k-2026")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyring.Parse("# rotated in December\n" + line + "\n\nold:" + strings.Repeat("QUFB", 11) + "\n"); err != nil {
		t.Fatalf("a generated key with an older one: %v", err)
	}
	for _, tc := range []struct{ text, want string }{
		{"", "at least one key"},
		{"k1", "want ID:SECRET"},
		{"k1:!!!", "not base64"},
		{"k1:c2hvcnQ", "at least 32"},
		{"bad id:" + strings.Repeat("QUFB", 11), "must be 1 to 64"},
		{line + "\n" + line, "used twice"},
	} {
		if _, err := keyring.Parse(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", tc.text, err, tc.want)
		}
	}
}
