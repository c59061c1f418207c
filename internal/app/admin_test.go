package app

import (
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsAndHealthAreOnTheAdminAddress: serve answers /metrics and the
// probes on --admin-addr only; on the port Slack and agents reach they are
// 404, so whoever can reach that port reads none of them. --admin-addr ""
// serves them nowhere, and SIGNOFF_ADMIN_ADDR stands for the flag when it is
// not given. An admin address that is taken keeps serve from starting, saying
// which.
func TestMetricsAndHealthAreOnTheAdminAddress(t *testing.T) {
	t.Parallel()
	paths := []string{"/metrics", "/livez", "/readyz", "/healthz"}
	run := func(t *testing.T, env []string, args ...string) *serveChild {
		dir := t.TempDir()
		cfg := noSlackConfig(t, dir)
		return startBackground(t, dir, append(env, noSlackEnv...), append([]string{"--config", cfg, "serve", "--addr", "127.0.0.1:0"}, args...)...)
	}
	check := func(t *testing.T, public, admin string) {
		t.Helper()
		for _, path := range paths {
			if admin != "" {
				waitFor(t, path+" 200 on the admin address", func() bool {
					status, _, _ := apiCall(t, admin, http.MethodGet, path, "", nil)
					return status == http.StatusOK
				})
			}
			if status, _, body := apiCall(t, public, http.MethodGet, path, "", nil); status != http.StatusNotFound {
				t.Errorf("%s on the public address: %d %s, want 404", path, status, body)
			}
		}
		if status, _, body := apiCall(t, public, http.MethodGet, "/v1/openapi.yaml", "", nil); status != http.StatusOK {
			t.Errorf("the agent API on the public address: %d %s", status, body)
		}
	}
	t.Run("--admin-addr", func(t *testing.T) {
		t.Parallel()
		s := run(t, nil, "--admin-addr", "127.0.0.1:0")
		public, admin := s.addr(t), s.adminAddr(t)
		if public == admin {
			t.Fatalf("one address for both: %s", public)
		}
		check(t, public, admin)
		status, _, body := apiCall(t, admin, http.MethodGet, "/metrics", "", nil)
		if status != http.StatusOK || !strings.Contains(string(body), "signoff_build_info") {
			t.Errorf("/metrics: %d, want the metrics\n%.300s", status, body)
		}
	})
	t.Run("SIGNOFF_ADMIN_ADDR", func(t *testing.T) {
		t.Parallel()
		s := run(t, []string{"SIGNOFF_ADMIN_ADDR=127.0.0.1:0"})
		check(t, s.addr(t), s.adminAddr(t))
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		s := run(t, []string{"SIGNOFF_ADMIN_ADDR=127.0.0.1:0"}, "--admin-addr", "")
		public := s.addr(t)
		s.await(t, "serve to say metrics and health are off", regexp.MustCompile(`signoff: metrics and health off \(--admin-addr ""\)`))
		check(t, public, "")
	})
	t.Run("taken", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		dir := t.TempDir()
		cfg := noSlackConfig(t, dir)
		code, out, errs := inFolder(t, dir, noSlackEnv, "--config", cfg, "serve", "--addr", "127.0.0.1:0", "--admin-addr", ln.Addr().String())
		if code == 0 || !strings.Contains(errs, "listen on "+ln.Addr().String()+" (--admin-addr") || strings.Contains(errs, "serving on") {
			t.Errorf("serve with its admin address taken: exit %d\n%s%s", code, out, errs)
		}
	})
}
