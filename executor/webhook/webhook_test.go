package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/examples/target"
	"github.com/signoff-dev/signoff/executor/webhook"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/workflow"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func keys(t testing.TB) [][]byte {
	t.Helper()
	k, err := stdwebhook.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startTarget runs the reference target on loopback.
func startTarget(t testing.TB) (*target.Target, *httptest.Server) {
	t.Helper()
	tg, err := target.New([]string{secret}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tg.Handler())
	t.Cleanup(srv.Close)
	return tg, srv
}

func newExec(t testing.TB, cfg webhook.Config) *webhook.Executor {
	t.Helper()
	if cfg.Keys == nil {
		cfg.Keys = keys(t)
	}
	x, err := webhook.New("deploy_service", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

var deploy = record.Action{Name: "deploy_service", Args: json.RawMessage(`{"env":"prod","service":"api","token":"tok-123","version":"1.4.2"}`)}

func TestExecuteSendsOneSignedCallWithTheKeyAndTheStoredArguments(t *testing.T) {
	tg, srv := startTarget(t)
	x := newExec(t, webhook.Config{URL: srv.URL + "/execute", LookupURL: srv.URL + "/operations/{key}"})
	call := workflow.Call{Key: "run_1/1", RunID: "run_1", Action: deploy, Fingerprint: "fp", ApprovedBy: []string{"U0LEAD0001"}, Attempt: 1}
	rc, err := x.ExecuteCall(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if rc.ID != "op-1" || !strings.Contains(string(rc.Detail), `"status":"done"`) {
		t.Fatalf("receipt %+v", rc)
	}
	got := tg.Received()
	if len(got) != 1 || !got[0].SignatureOK || got[0].IdempotencyKey != "run_1/1" || got[0].Path != "/execute" {
		t.Fatalf("received %+v", got)
	}
	var body webhook.Body
	if err := json.Unmarshal(got[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.IdempotencyKey != "run_1/1" || body.RunID != "run_1" || body.Action != "deploy_service" || string(body.Args) != string(deploy.Args) ||
		body.Fingerprint != "fp" || !slices.Equal(body.ApprovedBy, []string{"U0LEAD0001"}) || body.Attempt != 1 {
		t.Fatalf("body %s", got[0].Body)
	}
	// The same key again: the first result, no second effect.
	call.Attempt = 2
	rc2, err := x.ExecuteCall(context.Background(), call)
	if err != nil || rc2.ID != rc.ID || len(tg.Ledger()) != 1 {
		t.Fatalf("repeat: %+v %v, ledger %d", rc2, err, len(tg.Ledger()))
	}
	// And the lookup finds it, through the escaped key.
	lrc, found, err := x.Lookup(context.Background(), "run_1/1")
	if err != nil || !found || lrc.ID != "op-1" {
		t.Fatalf("lookup %+v %v %v", lrc, found, err)
	}
}

func TestArgumentsNeverInTheURLOrAHeader(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.String()
		for k, v := range r.Header {
			line += " " + k + "=" + strings.Join(v, ",")
		}
		seen = append(seen, line)
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	x := newExec(t, webhook.Config{URL: srv.URL + "/x", LookupURL: srv.URL + "/ops/{key}", CheckURL: srv.URL + "/check"})
	if _, err := x.Execute(context.Background(), "run_1/1", deploy); err != nil {
		t.Fatal(err)
	}
	if _, _, err := x.Lookup(context.Background(), "run_1/1"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 {
		t.Fatalf("requests %q", seen)
	}
	for _, s := range seen {
		for _, v := range []string{"tok-123", "1.4.2", "prod", strings.TrimPrefix(secret, "whsec_")} {
			if strings.Contains(s, v) {
				t.Errorf("%q appears in %q", v, s)
			}
		}
	}
}

func TestStatusCodesMapToTheEngineClasses(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		want       workflow.Class // ignored when ok
		ok         bool
		retryAfter bool
		msg        string
	}{
		{name: "200 receipt", status: 200, body: `{"id":"D-7"}`, ok: true},
		{name: "204 no body", status: 204, ok: true},
		{name: "201 text", status: 201, body: "deployed", ok: true},
		{name: "409 refused", status: 409, body: `{"message":"a deploy is already running"}`, want: workflow.ClassPermanent, msg: "a deploy is already running (409)"},
		{name: "400 refused", status: 400, body: `{"error":"no such service"}`, want: workflow.ClassPermanent, msg: "no such service"},
		{name: "401 refused", status: 401, want: workflow.ClassPermanent, msg: "Unauthorized"},
		{name: "408 unknown", status: 408, want: workflow.ClassUnknown},
		{name: "429 retry after", status: 429, header: map[string]string{"Retry-After": "7"}, want: workflow.ClassTransient, retryAfter: true},
		{name: "429 plain", status: 429, want: workflow.ClassTransient},
		{name: "503 retry after", status: 503, header: map[string]string{"Retry-After": "3"}, want: workflow.ClassTransient, retryAfter: true},
		{name: "503 plain unknown", status: 503, want: workflow.ClassUnknown},
		{name: "500 unknown", status: 500, want: workflow.ClassUnknown},
		{name: "302 not followed", status: 302, header: map[string]string{"Location": "/elsewhere"}, want: workflow.ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var elsewhere atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					elsewhere.Add(1)
					return
				}
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			x := newExec(t, webhook.Config{URL: srv.URL + "/execute"})
			rc, err := x.Execute(context.Background(), "run_1/1", deploy)
			if elsewhere.Load() != 0 {
				t.Fatal("a redirect was followed")
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				if rc.ID == "" || (tt.body != "" && len(rc.Detail) == 0) || !json.Valid(orEmpty(rc.Detail)) {
					t.Fatalf("receipt %+v", rc)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if c := workflow.Classify(err); c != tt.want {
				t.Fatalf("class %v, want %v (%v)", c, tt.want, err)
			}
			var ra interface{ RetryAfter() time.Duration }
			if got := errors.As(err, &ra); got != tt.retryAfter {
				t.Fatalf("retry-after %v, want %v", got, tt.retryAfter)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %q, want %q", err, tt.msg)
			}
		})
	}
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func TestReceiptIsCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"id":"x","pad":"` + strings.Repeat("a", 2*webhook.MaxReceipt) + `"}`))
	}))
	defer srv.Close()
	rc, err := newExec(t, webhook.Config{URL: srv.URL}).Execute(context.Background(), "run_1/1", deploy)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Detail) > webhook.MaxReceipt+100 || !json.Valid(rc.Detail) || !strings.Contains(string(rc.Detail), `"truncated":true`) {
		t.Fatalf("detail of %d bytes: %.80s", len(rc.Detail), rc.Detail)
	}
}

func TestConnectionRefusedIsCertainlyNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	_, err = newExec(t, webhook.Config{URL: "http://" + addr + "/execute"}).Execute(context.Background(), "run_1/1", deploy)
	if c := workflow.Classify(err); c != workflow.ClassTransient {
		t.Fatalf("class %v (%v), want transient", c, err)
	}
}

func TestDropAfterSendingIsUnknown(t *testing.T) {
	tg, srv := startTarget(t)
	tg.Fail(target.DropAfterCommit)
	_, err := newExec(t, webhook.Config{URL: srv.URL + "/execute"}).Execute(context.Background(), "run_1/1", deploy)
	if c := workflow.Classify(err); err == nil || c != workflow.ClassUnknown {
		t.Fatalf("class %v (%v), want unknown", c, err)
	}
	if len(tg.Ledger()) != 1 {
		t.Fatalf("ledger %v", tg.Ledger())
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		found      bool
		wantErr    bool
		class      workflow.Class // of the error
	}{
		{name: "200 happened", status: 200, found: true},
		{name: "404 never happened", status: 404},
		{name: "500 cannot tell yet", status: 500, wantErr: true, class: workflow.ClassUnknown},
		{name: "503 with Retry-After: still in progress", status: 503, retryAfter: "60", wantErr: true, class: workflow.ClassTransient},
		{name: "409 with Retry-After: still in progress", status: 409, retryAfter: "5", wantErr: true, class: workflow.ClassTransient},
		{name: "409 cannot tell yet", status: 409, wantErr: true, class: workflow.ClassUnknown},
		{name: "401 refuses to say", status: 401, wantErr: true, class: workflow.ClassPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.EscapedPath()
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(`{"id":"D-1"}`))
			}))
			defer srv.Close()
			x := newExec(t, webhook.Config{URL: srv.URL + "/x", LookupURL: srv.URL + "/operations/{key}/status"})
			rc, found, err := x.Lookup(context.Background(), "run_1/1")
			if found != tt.found || (err != nil) != tt.wantErr || (found && rc.ID != "D-1") {
				t.Fatalf("lookup = %+v %v %v", rc, found, err)
			}
			if err != nil && workflow.Classify(err) != tt.class {
				t.Fatalf("lookup error %v is of class %v, want %v", err, workflow.Classify(err), tt.class)
			}
			if path != "/operations/run_1%2F1/status" {
				t.Fatalf("path %q", path)
			}
		})
	}
	x := newExec(t, webhook.Config{URL: "https://deployer.internal/x"})
	if _, found, err := x.Lookup(context.Background(), "run_1/1"); found || err != nil {
		t.Fatalf("without lookup_url: %v %v, want not found (send again with the same key)", found, err)
	}
}

func TestCheck(t *testing.T) {
	tg, srv := startTarget(t)
	x := newExec(t, webhook.Config{URL: srv.URL + "/execute", CheckURL: srv.URL + "/check"})
	if err := x.Check(context.Background(), deploy); err != nil {
		t.Fatalf("check: %v", err)
	}
	tg.CheckFails("api is frozen until Monday")
	err := x.Check(context.Background(), deploy)
	if workflow.Classify(err) != workflow.ClassPermanent || !strings.Contains(err.Error(), "api is frozen until Monday") {
		t.Fatalf("check = %v, want a failed check", err)
	}
	// Right before the write the check is asked again: a refusal then sends nothing.
	_, err = x.Execute(context.Background(), "run_1/1", deploy)
	if workflow.Classify(err) != workflow.ClassPermanent || len(tg.Ledger()) != 0 {
		t.Fatalf("execute = %v, ledger %v", err, tg.Ledger())
	}
	for _, r := range tg.Received() {
		if r.Path == "/execute" {
			t.Fatal("execute was called after a failed check")
		}
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	tests := []struct {
		name string
		cfg  webhook.Config
		want string
	}{
		{"no url", webhook.Config{}, "url: required"},
		{"ftp", webhook.Config{URL: "ftp://x/y"}, "want an http:// or https:// URL"},
		{"relative", webhook.Config{URL: "/deploy"}, "want an http"},
		{"credentials", webhook.Config{URL: "https://u:p@x/y"}, "credentials do not belong"},
		{"lookup without key", webhook.Config{URL: "https://x/y", LookupURL: "https://x/ops"}, "lookup_url: must contain {key}"},
		{"key in url", webhook.Config{URL: "https://x/{key}"}, "belongs only in lookup_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Keys = keys(t)
			_, err := webhook.New("a", tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPlaintext(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:8787/x": false, "http://localhost/x": false, "http://[::1]/x": false,
		"https://deployer.internal/x": false, "http://deployer.internal/x": true, "http://10.0.0.5/x": true,
	} {
		if got := webhook.Plaintext(u); got != want {
			t.Errorf("Plaintext(%s) = %v, want %v", u, got, want)
		}
	}
}

func TestTLSCertificatesAreVerified(t *testing.T) {
	var reached atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	srv.StartTLS()
	defer srv.Close()
	// The test server's certificate is signed by no authority the system trusts.
	_, err := newExec(t, webhook.Config{URL: srv.URL + "/execute"}).Execute(context.Background(), "run_1/1", deploy)
	if err == nil || !strings.Contains(err.Error(), "certificate") || reached.Load() != 0 {
		t.Fatalf("err %v, reached %d: want a certificate error and no request", err, reached.Load())
	}
	if c := workflow.Classify(err); c != workflow.ClassTransient {
		t.Fatalf("class %v: a refused handshake sent nothing", c)
	}
}
