// Package metrics is signoff's Prometheus instrumentation, in one place: the
// collectors (all named signoff_…), a workflow.Hook that counts decisions, a
// wrapper that times executors, and the gauges a timer reads from the store.
// internal/app wires it in; workflow knows nothing of Prometheus.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

const namespace = "signoff"

// Metrics holds the collectors on their own registry.
type Metrics struct {
	reg *prometheus.Registry

	runs            *prometheus.GaugeVec
	waiting         *prometheus.GaugeVec
	oldestWaiting   prometheus.Gauge
	decisions       *prometheus.CounterVec
	decisionSeconds prometheus.Histogram
	executions      *prometheus.CounterVec
	execSeconds     *prometheus.HistogramVec
	outboxBacklog   *prometheus.GaugeVec
	outboxOldest    *prometheus.GaugeVec
	refused         *prometheus.CounterVec
	slackErrors     *prometheus.CounterVec
	httpRequests    *prometheus.CounterVec
	httpSeconds     *prometheus.HistogramVec
	reminders       prometheus.Counter
	escalations     prometheus.Counter
	scheduled       prometheus.Counter
	breakGlass      prometheus.Counter
}

// New registers every collector, the build info (version) and the Go and
// process collectors.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.runs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "runs",
		Help: "Runs in each status, ended ones included (pruned runs keep their status)."}, []string{"status"})
	m.waiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "waiting_runs",
		Help: "Runs waiting for approval, by the rule that asked for it."}, []string{"rule"})
	m.oldestWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "oldest_waiting_run_age_seconds",
		Help: "How long the oldest pending approval request has waited (0 when none)."})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "decisions_total",
		Help: "Decisions recorded by this process, by verdict and channel (slack, cli, api)."}, []string{"verdict", "channel"})
	m.decisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "decision_seconds",
		Help:    "Time from an approval request to each decision on it.",
		Buckets: []float64{10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 72 * 3600}})
	m.reminders = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "reminders_total",
		Help: "Reminders before a deadline recorded by this process."})
	m.escalations = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "escalations_total",
		Help: "Escalations of pending requests recorded by this process."})
	m.scheduled = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "scheduled_total",
		Help: "Approved runs set aside by this process until their execution window opens (signoff_runs{status=\"scheduled\"} counts those waiting)."})
	m.breakGlass = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "break_glass_total",
		Help: "Approvals forced (break-glass) recorded by this process."})
	m.executions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "executions_total",
		Help: "Executor calls by action and outcome (ok, refused, retryable, unknown)."}, []string{"action", "outcome"})
	m.execSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "executor_call_seconds",
		Help: "Latency of executor calls, by action.", Buckets: prometheus.DefBuckets}, []string{"action"})
	m.outboxBacklog = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "outbox_backlog",
		Help: "Outbox messages not delivered yet, by kind (slack.post, slack.update, slack.outcome_dm, slack.outcome_notify, callback); a kind with none is not shown."}, []string{"kind"})
	m.outboxOldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "outbox_oldest_age_seconds",
		Help: "Age of the oldest undelivered outbox message, by kind (no series for a kind with none)."}, []string{"kind"})
	m.slackErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "slack_api_errors_total",
		Help: "Slack Web API calls that failed, by method and Slack's error code (or http_NNN, transport)."}, []string{"method", "error"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "refused_requests_total",
		Help: "Slack requests refused, by reason (signature, app, team, role, fingerprint, deadline, replay)."}, []string{"reason"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by route and status code."}, []string{"route", "code"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "http_request_seconds",
		Help: "HTTP request latency, by route.", Buckets: prometheus.DefBuckets}, []string{"route"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1: the version of signoff and of Go that built it."}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	for _, c := range []prometheus.Collector{m.runs, m.waiting, m.oldestWaiting, m.decisions, m.decisionSeconds,
		m.executions, m.execSeconds, m.outboxBacklog, m.outboxOldest, m.refused, m.slackErrors, m.httpRequests, m.httpSeconds, m.reminders, m.escalations, m.scheduled, m.breakGlass, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	for _, s := range record.Statuses {
		m.runs.WithLabelValues(string(s))
	}
	// Every reason is exposed from the start, so that an alert on a rate
	// needs no series to appear first.
	for _, r := range []string{"signature", "app", "team", "role", "fingerprint", "deadline", "replay"} {
		m.refused.WithLabelValues(r)
	}
	return m
}

// SlackError counts one failed Slack API call.
func (m *Metrics) SlackError(method, code string) { m.slackErrors.WithLabelValues(method, code).Inc() }

// Refused counts one refused request.
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Registry is where the collectors are, for tests and lint.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveHTTP counts one answered request; route is the pattern, never the
// path, so that ids do not make a series each.
func (m *Metrics) ObserveHTTP(route string, code int, d time.Duration) {
	m.httpRequests.WithLabelValues(route, fmt.Sprint(code)).Inc()
	m.httpSeconds.WithLabelValues(route).Observe(d.Seconds())
}

// Hook counts decisions as the engine records them. It runs inside the
// decision's transaction: a transaction that then fails counts once too many,
// which a rate of decisions does not notice.
func (m *Metrics) Hook() workflow.Hook { return decisionHook{m} }

type decisionHook struct{ m *Metrics }

// OnTransition counts the decision a decided transition records: the last
// of its state's, on the transition's request; and each reminder,
// escalation, scheduling and forced approval.
func (h decisionHook) OnTransition(_ context.Context, t *workflow.Transition) ([]*record.OutboxMessage, error) {
	if t.Event == record.EventReminded {
		h.m.reminders.Inc()
		return nil, nil
	}
	if t.Event == record.EventEscalated {
		h.m.escalations.Inc()
		return nil, nil
	}
	// An approval outside the window schedules its run in the approving
	// transition itself (decided, edited, forced, submitted): it counts as
	// a scheduling too.
	if t.Event == record.EventScheduled || t.Run != nil && t.Run.Status == record.StatusScheduled && t.From != record.StatusScheduled {
		h.m.scheduled.Inc()
	}
	if t.Event == record.EventPolicyBypassed {
		h.m.breakGlass.Inc()
		return nil, nil
	}
	if t.Event != record.EventDecided || t.Run == nil || t.State == nil || len(t.State.Decisions) == 0 {
		return nil, nil
	}
	d := t.State.Decisions[len(t.State.Decisions)-1]
	h.m.decisions.WithLabelValues(string(d.Verdict), string(d.Via)).Inc()
	if r := t.Request; r != nil && r.ID == d.RequestID && !r.CreatedAt.IsZero() {
		h.m.decisionSeconds.Observe(max(d.At.Sub(r.CreatedAt).Seconds(), 0))
	}
	return nil, nil
}

// Executor times and counts the calls of action's executor. It keeps
// CallExecutor when the wrapped executor has it.
func (m *Metrics) Executor(action string, e workflow.Executor) workflow.Executor {
	t := timed{Executor: e, m: m, action: action}
	if ce, ok := e.(workflow.CallExecutor); ok {
		return timedCall{timed: t, call: ce}
	}
	return t
}

type timed struct {
	workflow.Executor
	m      *Metrics
	action string
}

func (t timed) observe(start time.Time, err error) {
	t.m.execSeconds.WithLabelValues(t.action).Observe(time.Since(start).Seconds())
	t.m.executions.WithLabelValues(t.action, outcome(err)).Inc()
}

func (t timed) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	start := time.Now()
	r, err := t.Executor.Execute(ctx, key, a)
	t.observe(start, err)
	return r, err
}

type timedCall struct {
	timed
	call workflow.CallExecutor
}

func (t timedCall) ExecuteCall(ctx context.Context, c workflow.Call) (record.Receipt, error) {
	start := time.Now()
	r, err := t.call.ExecuteCall(ctx, c)
	t.observe(start, err)
	return r, err
}

// outcome names an executor's answer as workflow's contract does.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	switch workflow.Classify(err) {
	case workflow.ClassPermanent:
		return "refused"
	case workflow.ClassTransient:
		return "retryable"
	}
	return "unknown"
}

// maxListed bounds the rows one refresh reads of each kind; more than that
// open runs or undelivered messages is an alarm whatever the exact number.
const maxListed = 10000

// Refresh sets the gauges from the engine's backlog, read in one read
// transaction on the indexes of status and of undelivered messages. Call it
// on a timer, not per scrape.
func (m *Metrics) Refresh(ctx context.Context, eng *workflow.Engine, now time.Time) error {
	b, err := eng.Backlog(ctx, maxListed)
	if err != nil {
		return fmt.Errorf("refresh metrics: %w", err)
	}
	counts := b.Runs
	waiting := map[string]int{}
	var oldest time.Time
	for _, q := range b.Pending {
		waiting[q.Rule]++
		if oldest.IsZero() || q.CreatedAt.Before(oldest) {
			oldest = q.CreatedAt
		}
	}
	// Undelivered messages whatever their next attempt: a message retried
	// later is still stuck.
	backlog := b.Undelivered
	for _, s := range record.Statuses {
		m.runs.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	m.waiting.Reset()
	for rule, n := range waiting {
		m.waiting.WithLabelValues(rule).Set(float64(n))
	}
	m.oldestWaiting.Set(age(now, oldest))
	kinds := map[record.OutboxKind]int{}
	first := map[record.OutboxKind]time.Time{}
	for _, o := range backlog {
		kinds[o.Kind]++
		if f, ok := first[o.Kind]; !ok || o.CreatedAt.Before(f) {
			first[o.Kind] = o.CreatedAt
		}
	}
	m.outboxBacklog.Reset()
	m.outboxOldest.Reset()
	for kind, n := range kinds {
		m.outboxBacklog.WithLabelValues(string(kind)).Set(float64(n))
		m.outboxOldest.WithLabelValues(string(kind)).Set(age(now, first[kind]))
	}
	return nil
}

func age(now, since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return max(now.Sub(since).Seconds(), 0)
}
