package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/storage/postgres"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// healthStore is a migrated store of one driver, with a way to put its schema
// one version behind, behind the store's back.
type healthStore struct {
	store  workflow.Store
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

// TestReadyz: /readyz is 200 when the store answers at this build's schema and
// the workers run, and 503 with the reason otherwise; /livez is 200 whatever
// the store does, and /healthz answers as /readyz.
func TestReadyz(t *testing.T) {
	cases := []struct {
		name       string
		spoil      func(t *testing.T, hs healthStore, ws *workers)
		wantCode   int
		wantReason string
	}{
		{"ready", func(*testing.T, healthStore, *workers) {}, http.StatusOK, ""},
		{"store unreachable", func(t *testing.T, hs healthStore, _ *workers) { hs.store.Close() }, http.StatusServiceUnavailable, "store unreachable"},
		{"schema behind", func(t *testing.T, hs healthStore, _ *workers) { hs.behind(t) }, http.StatusServiceUnavailable, "schema not current"},
		{"workers not started", func(_ *testing.T, _ healthStore, ws *workers) { ws.want.Store(0); ws.up.Store(0) }, http.StatusServiceUnavailable, "workers not started"},
		{"a worker stopped", func(_ *testing.T, _ healthStore, ws *workers) { ws.up.Add(-1) }, http.StatusServiceUnavailable, "workers stopped: 4 of 5 running"},
	}
	for driver, open := range healthStores(t) {
		for _, tc := range cases {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				hs := open(t)
				ws := &workers{}
				ws.want.Store(5)
				ws.up.Store(5)
				e := echo.New()
				(&health{store: hs.store, workers: ws, log: slog.New(slog.DiscardHandler)}).register(e)
				tc.spoil(t, hs, ws)

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
