package bot

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// The Slack app and organisation the tests are configured for; the
// fixtures in fixtures/slack name them.
const (
	hSecret       = "test-signing-secret-0f3e9a7c2b1d"
	hAppID        = "A0SIGNOFF1"
	hTeamID       = "T0SHOP0001"
	hEnterpriseID = "E0SHOPORG1"
	hChannel      = "C0APPROVALS"

	leadGrace = "U0LEAD0001"
	leadOmar  = "U0LEAD0002"
	manager   = "U0MGR00001"
	nobody    = "U0NOBODY01"
)

var hStart = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func refOf(v *workflow.RunView) Ref {
	return Ref{RunID: v.ID, RequestID: v.Gate.RequestID, Fingerprint: v.Gate.Fingerprint}
}

// fixture reads fixtures/slack/name and fills its {{PLACEHOLDERS}}: the run,
// request and fingerprint of ref (and the button value and private metadata
// made of them), the user, and any extra vars.
func fixture(t testing.TB, name string, ref Ref, user string, vars map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "slack", name))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"RUN_ID": ref.RunID, "REQUEST_ID": ref.RequestID, "FINGERPRINT": ref.Fingerprint,
		"SHORT_FINGERPRINT": policy.ShortFingerprint(ref.Fingerprint), "REF": ref.String(), "USER_ID": user,
	}
	for k, v := range vars {
		all[k] = v
	}
	s := string(b)
	form := strings.HasSuffix(name, ".form")
	for k, v := range all {
		if form {
			v = url.QueryEscape(v)
		} else {
			q, _ := json.Marshal(v)
			v = string(q[1 : len(q)-1])
		}
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	if i := strings.Index(s, "{{"); i >= 0 {
		t.Fatalf("fixture %s: unfilled placeholder at %q", name, s[i:min(len(s), i+30)])
	}
	s = freshTrigger(s)
	if form {
		return []byte(strings.TrimSpace(s))
	}
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(s)); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return c.Bytes()
}

var (
	triggers   atomic.Int64
	triggerIDs = regexp.MustCompile(`("trigger_id"\s*:\s*"|trigger_id=)\d+\.\d+\.`)
)

// freshTrigger gives a fixture a trigger id of its own, as Slack gives every
// click and command: two requests made from one fixture are two requests, not
// a replay (which the server answers once). The recorded id's tail is kept,
// so the id reads as the recorded one with a new counter.
func freshTrigger(s string) string {
	n := triggers.Add(1)
	return triggerIDs.ReplaceAllString(s, "${1}"+strconv.FormatInt(7811284101234+n, 10)+".4471802230.")
}

// formBody is an interaction payload as Slack posts it.
func formBody(payload []byte) []byte {
	return []byte("payload=" + url.QueryEscape(string(payload)))
}

// signed returns headers signing body at ts with secret, as Slack does.
func signed(secret string, ts int64, body []byte) http.Header { return SignedHeader(secret, ts, body) }
