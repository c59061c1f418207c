package target

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks specification's example must verify: a target that
// accepts it accepts what signoff sends.
func TestSignatureOfTheSpecificationExample(t *testing.T) {
	tg, err := New([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tg.now = func() time.Time { return time.Unix(1614265330, 0) }
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,bm9wZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	if !tg.signatureOK(h, body) {
		t.Fatal("the specification's example does not verify")
	}
	if tg.signatureOK(h, []byte(`{"test": 2432232315}`)) {
		t.Fatal("a changed body verifies")
	}
	tg.now = func() time.Time { return time.Unix(1614265330, 0).Add(time.Hour) }
	if tg.signatureOK(h, body) {
		t.Fatal("an hour-old message verifies")
	}
}

func TestUnsignedRequestsChangeNothing(t *testing.T) {
	tg, err := New([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/execute", strings.NewReader(`{"idempotency_key":"k/1","action":"a","args":{}}`))
	req.Header.Set("Idempotency-Key", "k/1")
	tg.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || len(tg.Ledger()) != 0 {
		t.Fatalf("status %d, ledger %v", rec.Code, tg.Ledger())
	}
}

// The Python snippet in examples/verify checks itself against the
// specification's example, a changed body and an old timestamp.
func TestPythonVerifier(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	out, err := exec.Command(py, "../verify/verify_webhook.py").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("verify_webhook.py: %v\n%s", err, out)
	}
}
