package command

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCommandReceipt: whatever a program prints, the receipt has an id and its
// detail is JSON the store can hold.
func FuzzCommandReceipt(f *testing.F) {
	for _, s := range []string{`{"id":"R-1"}`, `{"id":7}`, "rotated", "", "\xff\xfe", `[1,2]`, `{"id":"` + strings.Repeat("x", 300) + `"}`} {
		f.Add([]byte(s), 1<<16)
	}
	f.Fuzz(func(t *testing.T, out []byte, max int) {
		r := &result{stdout: capped{max: max%(1<<16) + 1}}
		r.stdout.Write(out)
		rc := r.receipt("run_1/1")
		if rc.ID == "" || len(rc.ID) > 200 {
			t.Fatalf("id %q", rc.ID)
		}
		if len(rc.Detail) > 0 && !json.Valid(rc.Detail) {
			t.Fatalf("detail %q is not JSON", rc.Detail)
		}
	})
}
