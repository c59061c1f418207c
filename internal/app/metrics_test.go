package app

import (
	"bufio"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
)

// scrape reads /metrics into series (name{labels} as exposed) → value.
func scrape(t *testing.T, s *served) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetrics: after submit → approve in Slack → done, and a click refused
// for want of a role, /metrics counts one approval from Slack and its wait,
// one successful executor call, the requests Slack sent, and the gauges
// follow the run out of waiting; the exposition passes the library's lint.
func TestMetrics(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string { return pgtest.Schema(t) }}, // skips without SIGNOFF_TEST_POSTGRES
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db(t)
			if db != "" {
				if code, out, errs := signoffIn(t, t.TempDir(), "", "--db", db, "migrate"); code != exitDone {
					t.Fatalf("migrate: exit %d %s%s", code, out, errs)
				}
			}
			s := startServedOn(t, db, nil)
			code, out := s.cli(t, "submit", filepath.Join("..", "..", "fixtures", "proposals", "refund-double-charge.json"))
			if code != exitWaiting {
				t.Fatalf("submit exit %d:\n%s", code, out)
			}
			id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
			waitFor(t, "the waiting run in the gauges", func() bool {
				m := scrape(t, s)
				return m[`signoff_runs{status="waiting_approval"}`] == 1 && m[`signoff_waiting_runs{rule="large-refund"}`] == 1
			})
			v := s.get(t, id)
			// The refused clicker is not told: Slack refuses the ephemeral message.
			s.slack.ErrorNext("chat.postEphemeral", "user_not_in_channel")
			if status, body := s.click(t, "block_actions_approve.json", "U0INTRUDER", v); status != http.StatusOK {
				t.Fatalf("refused click: %d %s", status, body)
			}
			if status, body := s.click(t, "block_actions_approve.json", "U0LEAD0001", v); status != http.StatusOK {
				t.Fatalf("click: %d %s", status, body)
			}
			waitFor(t, "the run to finish", func() bool { return s.get(t, id).Status == record.StatusDone })
			unsigned, err := http.Post("http://"+s.addr+"/slack/interactions", "application/x-www-form-urlencoded", strings.NewReader("payload=%7B%7D"))
			if err != nil {
				t.Fatal(err)
			}
			unsigned.Body.Close()
			if unsigned.StatusCode != http.StatusUnauthorized {
				t.Fatalf("an unsigned request: %d, want 401", unsigned.StatusCode)
			}
			var m map[string]float64
			waitFor(t, "the gauges to follow", func() bool {
				m = scrape(t, s)
				// A refresh that read the store before the run finished may
				// still show it executing: the gauges lag by one refresh, and
				// a scrape may land while a refresh sets them one by one.
				return m[`signoff_runs{status="waiting_approval"}`] == 0 && m[`signoff_runs{status="executing"}`] == 0 &&
					backlog(m) == 0 && !exposes(m, "signoff_outbox_oldest_age_seconds{") &&
					!exposes(m, "signoff_waiting_runs{")
			})
			for series, want := range map[string]float64{
				`signoff_decisions_total{channel="slack",verdict="approve"}`:                              1,
				`signoff_decision_seconds_count`:                                                          1,
				`signoff_executions_total{action="request_refund",outcome="ok"}`:                          1,
				`signoff_executor_call_seconds_count{action="request_refund"}`:                            1,
				`signoff_http_requests_total{code="200",route="/slack/interactions"}`:                     2,
				`signoff_http_request_seconds_count{route="/slack/interactions"}`:                         3,
				`signoff_http_requests_total{code="401",route="/slack/interactions"}`:                     1,
				`signoff_slack_api_errors_total{error="user_not_in_channel",method="chat.postEphemeral"}`: 1,
				`signoff_refused_requests_total{reason="role"}`:                                           1,
				`signoff_refused_requests_total{reason="signature"}`:                                      1,
				`signoff_refused_requests_total{reason="fingerprint"}`:                                    0,
				`signoff_refused_requests_total{reason="replay"}`:                                         0,
				`signoff_runs{status="executing"}`:                                                        0,
				`signoff_runs{status="done"}`:                                                             1,
				`signoff_runs{status="needs_attention"}`:                                                  0,
				`signoff_oldest_waiting_run_age_seconds`:                                                  0,
				`signoff_build_info{goversion="` + goVersion(m) + `",version="test"}`:                     1,
			} {
				if got, ok := m[series]; !ok || got != want {
					t.Errorf("%s = %v (exposed: %v), want %v", series, got, ok, want)
				}
			}
			for series := range m {
				if strings.HasPrefix(series, "signoff_decisions_total") && !strings.Contains(series, `verdict="approve"`) {
					t.Errorf("the refused click counted as a decision: %s", series)
				}
				if strings.HasPrefix(series, "signoff_waiting_runs{") {
					t.Errorf("a rule without waiting runs is still exposed: %s", series)
				}
			}
			problems, err := testutil.GatherAndLint(s.app.metrics.Registry())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				if strings.HasPrefix(p.Metric, "signoff_") {
					t.Errorf("lint: %s: %s", p.Metric, p.Text)
				}
			}
		})
	}
}

// goVersion is the goversion label build_info carries.
func goVersion(m map[string]float64) string {
	for series := range m {
		if rest, ok := strings.CutPrefix(series, `signoff_build_info{goversion="`); ok {
			return rest[:strings.IndexByte(rest, '"')]
		}
	}
	return ""
}

// backlog is the outbox backlog of every kind.
// exposes says whether any series starts with prefix.
func exposes(m map[string]float64, prefix string) bool {
	for series := range m {
		if strings.HasPrefix(series, prefix) {
			return true
		}
	}
	return false
}

func backlog(m map[string]float64) float64 {
	n := 0.0
	for series, v := range m {
		if strings.HasPrefix(series, "signoff_outbox_backlog{") {
			n += v
		}
	}
	return n
}
