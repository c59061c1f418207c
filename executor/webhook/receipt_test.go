package webhook

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzWebhookReceipt: whatever a target answers, the receipt has an id and its
// detail is JSON the store can hold.
func FuzzWebhookReceipt(f *testing.F) {
	for _, s := range []string{`{"id":"D-1"}`, `{"id":7}`, "deployed", "", "\xff\xfe", `[1,2]`, `{"id":"` + strings.Repeat("x", 300) + `"}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, truncated bool) {
		rc := (&response{status: 200, body: body, truncated: truncated}).receipt("run_1/1")
		if rc.ID == "" || len(rc.ID) > 200 {
			t.Fatalf("id %q", rc.ID)
		}
		if len(rc.Detail) > 0 && !json.Valid(rc.Detail) {
			t.Fatalf("detail %q is not JSON", rc.Detail)
		}
	})
}
