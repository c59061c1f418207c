package app

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/signoff-dev/signoff/storage/sqlite"
)

// TestServePublishesAnchorsToAFile: with anchors.to a file outside the
// store's folder, serve appends each anchor to it; verify then checks the
// newest one by default, and a store whose anchors were cut no longer
// verifies against it.
func TestServePublishesAnchorsToAFile(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "anchors.log")
	cfg := noSlackConfig(t, dir)
	appendTo(t, cfg, "anchors: {to: "+elsewhere+", every: 1h}\n")
	submitWaiting(t, dir)
	s := startServeChildEnv(t, dir, cfg, noSlackEnv)
	var logged string
	// serve logs where it published after it did, and its log comes through a pipe.
	waitFor(t, "an anchor in the file, and in serve's log", func() bool {
		b, _ := os.ReadFile(elsewhere)
		s.mu.Lock()
		logged = s.log.String()
		s.mu.Unlock()
		return strings.HasPrefix(string(b), "A1:") && strings.Contains(logged, `msg="audit anchor published"`)
	})
	if !strings.Contains(logged, `msg="audit anchor published" anchor=A1:`) || strings.Contains(logged, "anchors file") {
		t.Errorf("serve's log does not say where it published, or warns of a file outside the store's folder:\n%s", logged)
	}
	out := must(t, dir, exitDone, "--config", cfg, "verify")
	if !strings.Contains(out, "(the newest in "+elsewhere+"): the log extends it") {
		t.Fatalf("verify does not check the newest published anchor:\n%s", out)
	}
	db, err := sqlite.OpenDB(dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM audit_anchors`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, out, _ := signoff(t, dir, "--config", cfg, "verify"); code != exitFailed || !strings.Contains(out, "damaged") {
		t.Fatalf("verify after the anchors were cut: exit %d\n%s", code, out)
	}
}

// TestServePublishesAnchorsToAURL: each anchor is POSTed as JSON, with the
// bearer token SIGNOFF_ANCHOR_TOKEN gives.
func TestServePublishesAnchorsToAURL(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 4096)
		n, _ := r.Body.Read(b)
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+string(b[:n]))
		mu.Unlock()
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := noSlackConfig(t, dir)
	submitWaiting(t, dir)
	startBackground(t, dir, append([]string{"SIGNOFF_ANCHOR_TOKEN=tok-anchors"}, noSlackEnv...),
		"--config", cfg, "serve", "--addr", "127.0.0.1:0", "--anchor-to", srv.URL+"/anchors")
	waitFor(t, "an anchor POSTed", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(got[0], `Bearer tok-anchors {"anchor":"A1:`) {
		t.Fatalf("POSTed %q", got[0])
	}
}

// TestServeWarnsOfWhatIsKeptBesideTheStore: keys and anchors in the store's
// folder protect less than they seem to, and serve says so at start; keys
// from the environment draw no warning.
func TestServeWarnsOfWhatIsKeptBesideTheStore(t *testing.T) {
	dir := t.TempDir()
	cfg := noSlackConfig(t, dir)
	appendTo(t, cfg, "anchors: {to: anchors.log}\n") // beside the config, which is beside the store
	submitWaiting(t, dir)
	s := startServeChildEnv(t, dir, cfg, noSlackEnv)
	waitFor(t, "the warnings", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return strings.Contains(s.log.String(), "signoff: warning: the anchors file")
	})
	s.mu.Lock()
	logged := s.log.String()
	s.mu.Unlock()
	if !strings.Contains(logged, "signoff: warning: the integrity keys ("+filepath.Join(dir, "signoff.keys")+") are in the store's folder") {
		t.Errorf("no warning of the keys beside the store:\n%s", logged)
	}
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
