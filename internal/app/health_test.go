package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/internal/supervise"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// healthStore is a migrated store of one driver, with a way to put its schema
// one version behind, behind the store's back.
type healthStore struct {
	store  storage.Store
	behind func(t *testing.T)
}

func healthStores(t *testing.T) map[string]func(t *testing.T) healthStore {
	return map[string]func(t *testing.T) healthStore{
		"sqlite": func(t *testing.T) healthStore {
			path := filepath.Join(t.TempDir(), "signoff.db")
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return healthStore{store: s, behind: func(t *testing.T) {
				db, err := sqlite.OpenDB(path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
					t.Fatal(err)
				}
			}}
		},
		"postgres": func(t *testing.T) healthStore {
			dsn := pgtest.Schema(t) // skips without SIGNOFF_TEST_POSTGRES
			ctx := context.Background()
			if _, err := postgres.Migrate(ctx, dsn); err != nil {
				t.Fatal(err)
			}
			s, err := postgres.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return healthStore{store: s, behind: func(t *testing.T) {
				pgtest.Exec(t, dsn, `DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`)
			}}
		},
	}
}

// loopsAt is a loopStatus that says what it is told.
type loopsAt struct{ st supervise.Status }

func (l *loopsAt) Status() supervise.Status { return l.st }

// TestReadyz: /readyz is 200 when the store answers at this build's schema and
// the workers run, and 503 with the reason otherwise; /livez is 200 whatever
// the store does, and /healthz answers as /readyz.
func TestReadyz(t *testing.T) {
	cases := []struct {
		name       string
		spoil      func(t *testing.T, hs healthStore, ls *loopsAt)
		wantCode   int
		wantReason string
	}{
		{"ready", func(*testing.T, healthStore, *loopsAt) {}, http.StatusOK, ""},
		{"store unreachable", func(t *testing.T, hs healthStore, _ *loopsAt) { hs.store.Close() }, http.StatusServiceUnavailable, "store unreachable"},
		{"schema behind", func(t *testing.T, hs healthStore, _ *loopsAt) { hs.behind(t) }, http.StatusServiceUnavailable, "schema not current"},
		{"workers not started", func(_ *testing.T, _ healthStore, ls *loopsAt) { ls.st = supervise.Status{} }, http.StatusServiceUnavailable, "workers not started"},
		{"a worker stopped", func(_ *testing.T, _ healthStore, ls *loopsAt) {
			ls.st.Running--
			ls.st.Exited = append(ls.st.Exited, supervise.Exit{Name: "deliver callbacks"})
		}, http.StatusServiceUnavailable, "workers stopped: 4 of 5 running"},
	}
	for driver, open := range healthStores(t) {
		for _, tc := range cases {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				hs := open(t)
				ls := &loopsAt{st: supervise.Status{Started: 5, Running: 5}}
				e := echo.New()
				(&health{store: hs.store, engine: engineOn(t, hs.store), loops: ls, log: slog.New(slog.DiscardHandler)}).register(e)
				tc.spoil(t, hs, ls)

				for _, path := range []string{"/readyz", "/healthz"} {
					code, body := probe(t, e, path)
					if code != tc.wantCode {
						t.Fatalf("%s: %d %v, want %d", path, code, body, tc.wantCode)
					}
					if tc.wantReason != "" && !strings.Contains(body["reason"], tc.wantReason) {
						t.Fatalf("%s: reason %q, want it to say %q", path, body["reason"], tc.wantReason)
					}
					if tc.wantCode == http.StatusOK && body["status"] != "ok" {
						t.Fatalf("%s: %v", path, body)
					}
				}
				if code, body := probe(t, e, "/livez"); code != http.StatusOK {
					t.Fatalf("/livez: %d %v, want 200 while the process answers", code, body)
				}
			})
		}
	}
}

// TestReadyzNamesTheLoopThatStopped: a loop of the supervisor that returned,
// with an error or without, makes /readyz 503 with its name and what it
// returned.
func TestReadyzNamesTheLoopThatStopped(t *testing.T) {
	hs := healthStores(t)["sqlite"](t)
	loops := supervise.New(t.Context())
	defer loops.Stop()
	for _, name := range []string{"execute approved runs", "expire runs past their deadline", "log audit events"} {
		loops.Go(name, func(ctx context.Context) error { <-ctx.Done(); return nil })
	}
	e := echo.New()
	(&health{store: hs.store, engine: engineOn(t, hs.store), loops: loops, log: slog.New(slog.DiscardHandler)}).register(e)
	if code, body := probe(t, e, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with every loop running: %d %v", code, body)
	}
	loops.Go("deliver callbacks", func(context.Context) error { return errors.New("the store went away") })
	loops.Go("publish audit anchors", func(context.Context) error { return nil })
	waitFor(t, "both loops returned", func() bool { return loops.Status().Running == 3 })
	code, body := probe(t, e, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with two loops returned: %d %v, want 503", code, body)
	}
	for _, want := range []string{"workers stopped: 3 of 5 running", "deliver callbacks: the store went away", "publish audit anchors returned"} {
		if !strings.Contains(body["reason"], want) {
			t.Errorf("reason %q does not say %q", body["reason"], want)
		}
	}
}

// TestServeCountsItsListenersAsLoops: the listeners of serve are loops of
// its supervisor too: with the public one shut down, the admin listener's
// /readyz says so by name.
func TestServeCountsItsListenersAsLoops(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "signoff.yaml")
	a, err := openApp(t.Context(), options{db: dbPath(dir), shop: shopPath(dir), config: cfg, server: true}, noEnv, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := startServer(t.Context(), a, serveOptions{addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + s.adminAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz of a running serve: %d %s", code, body)
	}
	if err := s.http.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "/readyz 503", func() bool {
		var code int
		code, body = readyz()
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, "serve http returned") {
		t.Fatalf("/readyz: %s, want it to name the public listener", body)
	}
}

func probe(t *testing.T, e *echo.Echo, path string) (int, map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code, body
}

// TestServeProbes: a running serve answers all three probes with 200 once its
// workers are up.
func TestServeProbes(t *testing.T) {
	s := startServed(t)
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		var last string
		waitFor(t, path+" 200", func() bool {
			resp, err := http.Get("http://" + s.adminAddr + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			last = string(b)
			return resp.StatusCode == http.StatusOK
		})
		if !strings.Contains(last, `"ok"`) {
			t.Fatalf("%s: %s", path, last)
		}
	}
}

// engineOn is an engine on st, for what reads the store through one.
func engineOn(t testing.TB, st storage.Store) *workflow.Engine {
	t.Helper()
	roles, err := policy.NewRoles([]policy.Role{{Name: "team_lead", Members: []string{"U0LEAD0001"}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New("rev-1", []policy.Rule{{Name: "everything", When: "true", Risk: "low"}}, roles)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Store: st, Policy: pol, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
