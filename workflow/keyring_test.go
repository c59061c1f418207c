package workflow_test

import (
	"bytes"
	"testing"

	"github.com/signoff-dev/signoff/workflow"
)

// TestDerivedKeys: a derived key is the same from the same ring, differs by
// purpose and by key, follows the ring's order (the sealing key first) and
// holds none of the ring's secrets; no ring derives none.
func TestDerivedKeys(t *testing.T) {
	const a = "ka:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE"
	const b = "kb:" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI"
	parse := func(text string) *workflow.Keyring {
		t.Helper()
		r, err := workflow.ParseKeyring(text)
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
	var none *workflow.Keyring
	if none.Derive("api-cursor") != nil {
		t.Error("no ring derived keys")
	}
}
