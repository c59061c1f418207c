package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/keyring"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/postgres/pgtest"
	"github.com/signoff-dev/signoff/workflow"
)

// replicaTimeout bounds one replica process; a hung one is sent SIGQUIT,
// which dumps its goroutines into its output.
const replicaTimeout = 3 * time.Minute

// logBuffer is a child's output, readable while the child runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines are the lines of the output that contain every one of subs.
func (l *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok && line != "" {
			out = append(out, line)
		}
	}
	return out
}

// replica is one `signoff serve` child process.
type replica struct {
	name    string
	cmd     *exec.Cmd
	out     *logBuffer // stdout and stderr, through pipes
	addr    string
	exited  chan struct{}
	waitErr error // cmd.Wait's error, once exited is closed
}

func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// waitExit waits, bounded, for the process to end.
func (r *replica) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(within):
		t.Fatalf("%s (pid %d) did not exit within %s", r.name, r.cmd.Process.Pid, within)
	}
}

// signal is the signal that ended the process, or 0.
func (r *replica) signal() syscall.Signal {
	if ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// kill ends the process with SIGKILL, as a crashed machine would.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", r.name, err)
	}
	r.waitExit(t, 30*time.Second)
	if sig := r.signal(); sig != syscall.SIGKILL {
		t.Fatalf("%s ended with %v, not SIGKILL", r.name, r.waitErr)
	}
}

// stop asks the process to shut down (SIGTERM) and checks that it does, cleanly.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("stop %s: %v", r.name, err)
	}
	r.waitExit(t, 30*time.Second)
	if r.waitErr != nil {
		t.Errorf("%s did not stop cleanly on SIGTERM: %v", r.name, r.waitErr)
	}
}

// procState is the state letter of a process in /proc (R, S, T for stopped, …).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, b)
	}
	return b[i+2], nil
}

// cluster is signoff replicas sharing one fresh PostgreSQL schema and one shop
// file, with a fake Slack Web API and an in-process app (for submitting and
// reading) in this process.
type cluster struct {
	t      *testing.T
	dsn    string
	shop   string
	config string
	keys   string // the integrity key file every replica shares
	slack  *fakeslack.Server
	app    *app
	client *http.Client
	// slots hold the current process of each replica; a restart replaces it.
	slots []atomic.Pointer[replica]

	mu  sync.Mutex
	all []*replica // every process started, for the logs
}

func newCluster(t *testing.T, replicas int) *cluster {
	t.Helper()
	dsn := pgtest.Schema(t) // skips without SIGNOFF_TEST_POSTGRES
	dir := t.TempDir()
	fs := fakeslack.New()
	t.Cleanup(fs.Close)
	c := &cluster{
		t: t, dsn: dsn, shop: filepath.Join(dir, "shop.db"), config: filepath.Join(dir, "signoff.yaml"), keys: filepath.Join(dir, "signoff.keys"),
		slack: fs, client: &http.Client{Timeout: 30 * time.Second},
		slots: make([]atomic.Pointer[replica], replicas),
	}
	yaml := string(config.DefaultYAML()) + fmt.Sprintf(`
slack:
  channel: C0APPROVALS
  app_id: A0SIGNOFF1
  team_id: T0SHOP0001
  api_url: %s
`, fs.URL())
	if err := os.WriteFile(c.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every replica seals with the same keys, as a secret manager would hand them out.
	keyLine, err := keyring.NewLine("cluster")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keys, []byte(keyLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := c.cli("migrate"); code != exitDone {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
	}
	// Opening the app creates and seeds the shop before any replica opens it.
	env := map[string]string{"SLACK_SIGNING_SECRET": serveSecret, "SLACK_BOT_TOKEN": serveToken}
	a, err := openApp(context.Background(), options{db: dsn, config: c.config, shop: c.shop, keys: c.keys}, func(k string) string { return env[k] }, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.app = a
	t.Cleanup(func() { a.Close() })
	// Registered before any replica's cleanup, so it runs after they are killed
	// and their output is complete.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		c.logUnfinished(t)
		for _, call := range c.slack.Calls("chat.postEphemeral") {
			t.Logf("told %s: %s", call.Form.Get("user"), call.Form.Get("text"))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.all {
			out := r.out.String()
			if len(out) > 32<<10 {
				out = "…" + out[len(out)-32<<10:]
			}
			t.Logf("output of %s (pid %d, %v):\n%s", r.name, r.cmd.Process.Pid, r.waitErr, out)
		}
	})
	return c
}

// logUnfinished logs the runs that are neither done nor rejected, with what
// they hold, to explain a failure.
func (c *cluster) logUnfinished(t *testing.T) {
	rs, err := c.app.engine.List(context.Background(), storage.RunFilter{})
	if err != nil {
		t.Logf("list runs: %v", err)
		return
	}
	n := 0
	for _, r := range rs {
		if r.Status == record.StatusDone || r.Status == record.StatusRejected {
			continue
		}
		if n++; n > 10 {
			t.Logf("…and more runs neither done nor rejected")
			return
		}
		v, err := c.app.engine.Get(context.Background(), r.ID)
		if err != nil {
			t.Logf("run %s: %v", r.ID, err)
			continue
		}
		t.Logf("run %s: %s (%s), lease %s until %s, decisions %+v, operations %+v",
			r.ID, r.Status, r.Reason, r.LeaseOwner, r.LeaseUntil.Format(time.RFC3339Nano), v.Decisions, v.Operations)
	}
}

// cli runs a command of the program in process against the cluster's database, shop and config.
func (c *cluster) cli(args ...string) (code int, stdout, stderr string) {
	full := append([]string{"--db", c.dsn, "--shop", c.shop, "--config", c.config, "--keys", c.keys}, args...)
	var out, errb bytes.Buffer
	code = run(context.Background(), full, noEnv, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

var servingOn = regexp.MustCompile(`signoff: serving on (\S+) `)

// start starts the replica of a slot as a child process (the test binary as
// the program) with extra environment variables, and waits until it listens.
func (c *cluster) start(slot int, name string, env ...string) *replica {
	t := c.t
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaTimeout)
	cmd := exec.CommandContext(ctx, self, "--db", c.dsn, "--shop", c.shop, "--config", c.config, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), asMainEnv+"=1",
		"SLACK_SIGNING_SECRET="+serveSecret, "SLACK_BOT_TOKEN="+serveToken, "SIGNOFF_OWNER="+name, "SIGNOFF_KEYS_FILE="+c.keys)
	cmd.Env = append(cmd.Env, env...)
	r := &replica{name: name, cmd: cmd, out: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		if r.running() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-r.exited // bounded: the process is gone, and WaitDelay bounds the pipes
		}
		cancel()
	})
	c.mu.Lock()
	c.all = append(c.all, r)
	c.mu.Unlock()
	eventually(t, name+" to listen", 60*time.Second, func() bool {
		if m := servingOn.FindStringSubmatch(r.out.String()); m != nil {
			r.addr = m[1]
			return true
		}
		if !r.running() {
			t.Fatalf("%s exited before listening: %v\n%s", name, r.waitErr, r.out)
		}
		return false
	})
	c.slots[slot].Store(r)
	return r
}

// eventually polls cond until it holds, failing t after within. No fixed sleeps.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", within, what)
		case <-tick.C:
		}
	}
}

// interaction fills a recorded Slack payload for a run's current request and
// returns the form body Slack would send.
func interaction(raw []byte, v *workflow.RunView, user, reason string) []byte {
	esc, _ := json.Marshal(reason)
	body := strings.NewReplacer(
		"{{USER_ID}}", user, "{{RUN_ID}}", v.ID, "{{REQUEST_ID}}", v.Gate.RequestID,
		"{{FINGERPRINT}}", v.Gate.Fingerprint, "{{SHORT_FINGERPRINT}}", policy.ShortFingerprint(v.Gate.Fingerprint),
		"{{REF}}", buttonRef(v), "{{REASON}}", string(esc[1:len(esc)-1]),
	).Replace(string(raw))
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(freshTrigger(body))); err != nil {
		panic(fmt.Sprintf("fixture is not JSON after filling: %v", err))
	}
	return []byte("payload=" + url.QueryEscape(compact.String()))
}

func buttonRef(v *workflow.RunView) string {
	return fmt.Sprintf("v1:%s:%s:%s", v.ID, v.Gate.RequestID, v.Gate.Fingerprint)
}

func readSlackFixture(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "slack", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// post sends a signed interaction to the replica of a slot. A replica that is
// down or dies while answering is what a load balancer routes around: the
// request goes to the next replica, until one answers or ctx ends.
func (c *cluster) post(ctx context.Context, form []byte, slot int) (status int, body, via string, err error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := slot; ; i++ {
		r := c.slots[i%len(c.slots)].Load()
		if r != nil && r.running() {
			status, body, err = c.postTo(ctx, r.addr, form)
			// A 503 says that a copy of this request has no answer: its
			// replica died while handling it. Sent again once the second
			// has turned, its signature makes it a new request, as when a
			// person clicks again.
			if err == nil && status != http.StatusServiceUnavailable {
				return status, body, r.name, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, "", "", fmt.Errorf("no replica answered: %w (last error %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (c *cluster) postTo(ctx context.Context, addr string, form []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/slack/interactions", bytes.NewReader(form))
	if err != nil {
		return 0, "", err
	}
	req.Header = bot.SignedHeader(serveSecret, time.Now().Unix(), form)
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (c *cluster) get(t *testing.T, id string) *workflow.RunView {
	t.Helper()
	v, err := c.app.engine.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (c *cluster) list(t *testing.T, statuses ...record.Status) []*record.Run {
	t.Helper()
	rs, err := c.app.engine.List(context.Background(), storage.RunFilter{Statuses: statuses})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func (c *cluster) changes(t *testing.T) []demo.Change {
	t.Helper()
	code, out, errs := c.cli("shop", "changes", "--json")
	if code != exitDone {
		t.Fatalf("shop changes: exit %d: %s", code, errs)
	}
	var ch []demo.Change
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatalf("shop changes --json: %v\n%s", err, out)
	}
	return ch
}

// verify runs `signoff verify` and checks that every chain is intact and every run was checked.
func (c *cluster) verify(t *testing.T, runs int) {
	t.Helper()
	code, out, errs := c.cli("verify")
	var r, cps, a int
	if _, err := fmt.Sscanf(out, "ok: %d runs, %d checkpoints, %d audit events verified", &r, &cps, &a); code != exitDone || err != nil || r != runs {
		t.Fatalf("verify: exit %d, %q %s; want ok over %d runs", code, out, errs, runs)
	}
	if !strings.Contains(out, "seals: checked") {
		t.Fatalf("verify did not check the seals every replica wrote:\n%s", out)
	}
}

// auditActions are the audit events of a run: action → the details of each.
func (c *cluster) auditActions(t *testing.T, id string) map[record.Event][]map[string]any {
	t.Helper()
	evs, err := c.app.engine.AuditLog(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[record.Event][]map[string]any{}
	for _, ev := range evs {
		var d map[string]any
		if len(ev.Detail) > 0 {
			if err := json.Unmarshal(ev.Detail, &d); err != nil {
				t.Fatalf("audit detail of %s %s: %v", id, ev.Action, err)
			}
		}
		out[ev.Action] = append(out[ev.Action], d)
	}
	return out
}

// submit submits a proposal in process; it must wait for approval.
func (c *cluster) submit(p *workflow.Proposal) (*workflow.RunView, error) {
	run, err := c.app.engine.Submit(context.Background(), p)
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", p.TaskID, err)
	}
	if run.Status != record.StatusWaitingApproval {
		return nil, fmt.Errorf("submit %s: status %s (%s), want waiting_approval", p.TaskID, run.Status, run.Reason)
	}
	return c.app.engine.Get(context.Background(), run.ID)
}

// workload is n gated proposals that can all succeed together, whichever of
// them are approved: large refunds (team lead) within what each charge has
// left, reshipments (team lead) within what each order holds, and return labels
// without free shipping (manager), which the shop issues any number of times
// for an item of an order, each under its own idempotency key.
func workload(n int, rng *rand.Rand) []*workflow.Proposal {
	type refund struct{ order, payment, currency string }
	refunds := []refund{ // 51.00 each: over the large-refund threshold of 50
		{"LK-507862", "PAY-507862-1", "CAD"}, {"LK-507862", "PAY-507862-1", "CAD"}, // 119.00 captured
		{"LK-507862", "PAY-507862-2", "CAD"}, {"LK-507862", "PAY-507862-2", "CAD"}, // 119.00 captured
		{"LK-640436", "PAY-640436-1", "CAD"}, // 81.00 captured
		{"LK-311208", "PAY-311208-1", "USD"}, // 88.50 captured
	}
	type item struct{ order, sku string }
	reships := []item{ // one each, never more in total than ordered
		{"LK-507862", "DESKLAMP"}, {"LK-640436", "PLANTER"}, {"LK-640436", "SOIL-5L"}, {"LK-640436", "SOIL-5L"},
		{"LK-793996", "SEEDS-BASIL"}, {"LK-311208", "MUG-OAT"}, {"LK-311208", "MUG-OAT"}, {"LK-311208", "MUG-OAT"},
		{"LK-311208", "MUG-OAT"}, {"LK-311208", "TEAPOT"}, {"LK-452190", "THROW-WOOL"}, {"LK-128844", "KETTLE"},
	}
	labelItems := []item{
		{"LK-507862", "DESKLAMP"}, {"LK-640436", "PLANTER"}, {"LK-640436", "SOIL-5L"}, {"LK-793996", "SEEDS-BASIL"},
		{"LK-311208", "MUG-OAT"}, {"LK-311208", "TEAPOT"}, {"LK-452190", "THROW-WOOL"}, {"LK-128844", "KETTLE"},
	}
	reasons := []string{"damaged", "defective", "wrong_item", "not_as_described", "changed_mind"}
	var actions []record.Action
	for _, r := range refunds {
		actions = append(actions, record.Action{Name: "request_refund", Args: json.RawMessage(fmt.Sprintf(
			`{"order_id": %q, "payment_id": %q, "amount": 51.00, "currency": %q, "reason_code": "RFD-GOODWILL"}`, r.order, r.payment, r.currency))})
	}
	for _, it := range reships {
		actions = append(actions, record.Action{Name: "reship_item", Args: json.RawMessage(fmt.Sprintf(
			`{"order_id": %q, "sku": %q, "quantity": 1}`, it.order, it.sku))})
	}
	for i := 0; len(actions) < n; i++ {
		it := labelItems[i%len(labelItems)]
		actions = append(actions, record.Action{Name: "create_return_label", Args: json.RawMessage(fmt.Sprintf(
			`{"order_id": %q, "sku": %q, "reason": %q, "free_shipping": false}`, it.order, it.sku, reasons[i%len(reasons)]))})
	}
	rng.Shuffle(len(actions), func(i, j int) { actions[i], actions[j] = actions[j], actions[i] })
	ps := make([]*workflow.Proposal, n)
	for i, a := range actions[:n] {
		task := fmt.Sprintf("T-R%03d", i)
		ps[i] = &workflow.Proposal{
			TaskID: task, Requester: record.Person{ID: agentID, Name: "Resolver agent"},
			Summary: "Replica test " + task, Actions: []record.Action{a},
			Evidence:       []record.Evidence{{Source: "ticket", Data: json.RawMessage(fmt.Sprintf(`{"id": %q}`, task))}},
			IdempotencyKey: "replicas-" + task,
		}
	}
	return ps
}

// kindOf is the kind of change the shop makes for an action.
var kindOf = map[string]string{
	"request_refund": demo.KindRefund, "reship_item": demo.KindReshipment, "create_return_label": demo.KindReturnLabel,
}

// decisionPlan is what happens to one run in Slack.
type decisionPlan struct {
	view *workflow.RunView
	// intent: approve, reject, or race (an approval and a rejection at once,
	// to two replicas; either may win).
	intent string
	// mode: once; twice (one after the other, to random replicas); or
	// concurrent (at once, to two different replicas).
	mode      string
	approvers []string // who may decide it
}

// TestReplicas: three `signoff serve` processes on one PostgreSQL schema and
// one shop take 200 gated runs. Approvals and rejections arrive at random
// replicas, some twice, some at the same moment at two replicas. One replica
// kills itself right after its first effect in the shop (before the receipt),
// another is SIGKILLed from outside while it holds leases on executing runs;
// both are restarted. In the end every approved action ran exactly once in the
// shop, no rejected one ran, no run is stuck, and the chains verify.
func TestReplicas(t *testing.T) {
	const (
		nRuns    = 200
		nSlots   = 3
		leaseTTL = "SIGNOFF_LEASE_TTL=2s"
	)
	c := newCluster(t, nSlots)
	// The plan (which run gets what, from whom, at which replica) follows from
	// the seed; the timing does not.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SIGNOFF_TEST_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SIGNOFF_TEST_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (SIGNOFF_TEST_SEED repeats the plan)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	began := time.Now()

	// replica-3 dies of SIGKILL at its first execution, between the shop's
	// change and the receipt.
	c.start(0, "replica-1", leaseTTL)
	c.start(1, "replica-2", leaseTTL)
	crashing := c.start(2, "replica-3", leaseTTL, "SIGNOFF_FAILPOINT=after-effect")

	// Submit, four at a time.
	props := workload(nRuns, rng)
	views := make([]*workflow.RunView, nRuns)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < nRuns; i = int(next.Add(1) - 1) {
				v, err := c.submit(props[i])
				if err != nil {
					t.Error(err)
					return
				}
				views[i] = v
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("submitted %d runs in %s", nRuns, time.Since(began).Round(time.Millisecond))

	// What happens to each run in Slack.
	plans := make([]*decisionPlan, nRuns)
	for i, v := range views {
		p := &decisionPlan{view: v, approvers: []string{lead1, lead2, manager}}
		if v.Gate.Approval.Role == "manager" {
			p.approvers = []string{manager}
		}
		switch x := rng.IntN(100); {
		case x < 60:
			p.intent = "approve"
		case x < 88:
			p.intent = "reject"
		default:
			p.intent = "race"
		}
		switch x := rng.IntN(100); {
		case p.intent == "race" || x >= 70:
			p.mode = "concurrent"
		case x < 45:
			p.mode = "once"
		default:
			p.mode = "twice"
		}
		plans[i] = p
	}

	fixtures := map[string][]byte{
		"approve": readSlackFixture(t, "block_actions_approve.json"),
		"reject":  readSlackFixture(t, "block_actions_reject.json"),
		"submit":  readSlackFixture(t, "view_submission_reject.json"),
	}
	// decide sends one approval (a click) or one rejection (a click on Reject,
	// then the modal submitted with the reason) to the replica of a slot.
	decide := func(ctx context.Context, p *decisionPlan, verdict string, slot int, rng *rand.Rand) error {
		user := p.approvers[rng.IntN(len(p.approvers))]
		if verdict == "approve" {
			status, body, via, err := c.post(ctx, interaction(fixtures["approve"], p.view, user, ""), slot)
			if err != nil || status != http.StatusOK || body != "" {
				return fmt.Errorf("approve %s at %s: %d %q %v", p.view.ID, via, status, body, err)
			}
			return nil
		}
		status, body, via, err := c.post(ctx, interaction(fixtures["reject"], p.view, user, ""), slot)
		if err != nil || status != http.StatusOK || body != "" {
			return fmt.Errorf("click reject on %s at %s: %d %q %v", p.view.ID, via, status, body, err)
		}
		reason := fmt.Sprintf("not needed for %s", p.view.TaskID)
		status, body, via, err = c.post(ctx, interaction(fixtures["submit"], p.view, user, reason), slot)
		// A refusal keeps the modal open with the reason under the input:
		// another decision won.
		if err != nil || status != http.StatusOK || (body != "" && !strings.Contains(body, "already")) {
			return fmt.Errorf("submit rejection of %s at %s: %d %q %v", p.view.ID, via, status, body, err)
		}
		return nil
	}
	send := func(ctx context.Context, p *decisionPlan, rng *rand.Rand) error {
		first := rng.IntN(nSlots)
		second := (first + 1 + rng.IntN(nSlots-1)) % nSlots
		v1, v2 := p.intent, p.intent
		if p.intent == "race" {
			v1, v2 = "approve", "reject"
		}
		r1, r2 := rand.New(rand.NewPCG(rng.Uint64(), 1)), rand.New(rand.NewPCG(rng.Uint64(), 2))
		switch p.mode {
		case "once":
			return decide(ctx, p, v1, first, r1)
		case "twice":
			return errors.Join(decide(ctx, p, v1, first, r1), decide(ctx, p, v2, second, r2))
		}
		var err1, err2 error
		var both sync.WaitGroup
		both.Go(func() { err1 = decide(ctx, p, v1, first, r1) })
		both.Go(func() { err2 = decide(ctx, p, v2, second, r2) })
		both.Wait()
		return errors.Join(err1, err2)
	}

	// Clicks stream in from eight people at once. The last third waits until a
	// replica has been killed from outside, so that the kill always lands
	// while runs are being executed and more work keeps coming after it.
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	clicksDone := make(chan struct{})
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for i := range plans {
			if i == 2*nRuns/3 {
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var clickers sync.WaitGroup
	for w := range 8 {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		clickers.Go(func() {
			for i := range jobs {
				if err := send(ctx, plans[i], r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	go func() {
		clickers.Wait()
		close(clicksDone)
	}()
	// Whatever happens below, no clicker outlives the test.
	defer func() {
		cancel()
		<-clicksDone
	}()

	// replica-3 dies at its first execution; it comes back without the failpoint.
	eventually(t, "replica-3 to die at its first execution", 60*time.Second, func() bool { return !crashing.running() })
	if sig := crashing.signal(); sig != syscall.SIGKILL {
		t.Fatalf("replica-3 ended with %v, want SIGKILL at the after-effect failpoint", crashing.waitErr)
	}
	t.Logf("replica-3 died after its first effect, %s in", time.Since(began).Round(time.Millisecond))
	c.start(2, "replica-3", leaseTTL)

	// replica-1 is SIGKILLed while it holds leases on executing runs.
	victim := c.slots[0].Load()
	var held []string
	eventually(t, "replica-1 to hold a lease on an executing run", 60*time.Second, func() bool {
		now := time.Now()
		for _, r := range c.list(t, record.StatusExecuting) {
			if r.LeaseOwner == victim.name && r.LeaseUntil.After(now) {
				held = append(held, r.ID)
			}
		}
		return len(held) > 0
	})
	victim.kill(t)
	t.Logf("replica-1 killed holding the lease of %d executing run(s), %s in", len(held), time.Since(began).Round(time.Millisecond))
	close(release)
	c.start(0, "replica-1", leaseTTL)

	select {
	case <-clicksDone:
	case <-time.After(90 * time.Second):
		t.Fatal("the clicks did not finish within 90s")
	}
	if t.Failed() {
		t.FailNow()
	}
	// Every click was answered, so every run was decided: none still waits.
	if waiting := c.list(t, record.StatusWaitingApproval); len(waiting) > 0 {
		t.Fatalf("%d run(s) still wait for approval after every click was answered, e.g. %s", len(waiting), waiting[0].ID)
	}
	eventually(t, "no run to be running or executing", 60*time.Second, func() bool {
		return len(c.list(t, record.StatusRunning, record.StatusExecuting, record.StatusWaitingApproval)) == 0
	})
	settled := time.Since(began)

	// Every run ended: approved ones done, rejected ones rejected, nothing else.
	ch := c.changes(t)
	byKey := map[string]demo.Change{}
	for _, x := range ch {
		if _, dup := byKey[x.Key]; dup {
			t.Errorf("the shop made two changes under key %s", x.Key)
		}
		byKey[x.Key] = x
	}
	var done, rejected, reconciled, retried int
	for _, p := range plans {
		v := c.get(t, p.view.ID)
		key := v.ID + "/1"
		if len(v.Decisions) != 1 {
			t.Errorf("run %s (%s, %s): %d decisions, want 1: %+v", v.ID, p.intent, p.mode, len(v.Decisions), v.Decisions)
			continue
		}
		verdict := string(v.Decisions[0].Decision)
		if p.intent != "race" && verdict != p.intent {
			t.Errorf("run %s: decided %s, but only %s was sent", v.ID, verdict, p.intent)
		}
		switch {
		case verdict == "approve" && v.Status == record.StatusDone:
			done++
			x, ok := byKey[key]
			if !ok {
				t.Errorf("run %s is done but the shop has no change under %s", v.ID, key)
				continue
			}
			if want := kindOf[v.Actions[0].Name]; x.Kind != want {
				t.Errorf("run %s: the shop made a %s under %s, want a %s", v.ID, x.Kind, key, want)
			}
			if len(v.Operations) != 1 || v.Operations[0].Key != key || v.Operations[0].Status != record.OpCommitted ||
				receiptID(t, v.Operations[0].Receipt) != x.ID {
				t.Errorf("run %s: operations %+v; the shop's change is %s", v.ID, v.Operations, x.ID)
			} else if v.Operations[0].Attempts > 1 {
				retried++
			}
			if len(c.auditActions(t, v.ID)[record.EventReconciled]) > 0 {
				reconciled++
			}
		case verdict == "reject" && v.Status == record.StatusRejected:
			rejected++
			if x, ok := byKey[key]; ok {
				t.Errorf("run %s was rejected, yet the shop made %+v", v.ID, x)
			}
			if len(v.Operations) != 0 {
				t.Errorf("run %s was rejected, yet has operations %+v", v.ID, v.Operations)
			}
			if p.intent == "reject" && !c.modalOpened(v) {
				t.Errorf("run %s: no reject modal was opened", v.ID)
			}
		default:
			t.Errorf("run %s: decided %s, status %s (%s)", v.ID, verdict, v.Status, v.Reason)
		}
	}
	if done+rejected != nRuns {
		t.Errorf("%d done + %d rejected of %d runs", done, rejected, nRuns)
	}
	if len(ch) != done {
		t.Errorf("the shop made %d changes for %d approved runs", len(ch), done)
	}
	for _, x := range ch {
		if !strings.HasPrefix(x.Key, "run_") || !strings.HasSuffix(x.Key, "/1") {
			t.Errorf("the shop made a change under key %s, not an operation of a run", x.Key)
		}
	}
	// The effect replica-3 made before dying was found in the shop's register,
	// not made again.
	if reconciled == 0 {
		t.Errorf("no run was reconciled from the shop's register, yet replica-3 died between an effect and its receipt")
	}
	// Nobody was told that a click failed inside signoff.
	for _, call := range c.slack.Calls("chat.postEphemeral") {
		if text := call.Form.Get("text"); strings.Contains(text, "internal error") {
			t.Errorf("a clicker was told: %s", text)
		}
	}
	c.verify(t, nRuns)

	late := 0
	c.mu.Lock()
	for _, r := range c.all {
		late += len(r.out.lines("late write refused"))
	}
	c.mu.Unlock()
	for i := range c.slots {
		c.slots[i].Load().stop(t)
	}
	t.Logf("%d approved and done, %d rejected; settled %s after the first submit; %d reconciled from the shop, %d sent more than once (same key), %d late writes refused",
		done, rejected, settled.Round(time.Millisecond), reconciled, retried, late)
}

// modalOpened reports whether a reject modal was opened for the run's request.
func (c *cluster) modalOpened(v *workflow.RunView) bool {
	ref := buttonRef(v)
	for _, call := range c.slack.Calls("views.open") {
		if strings.Contains(call.Form.Get("view"), ref) {
			return true
		}
	}
	return false
}

// TestReplicaPausedPastItsLease: replica A freezes (SIGSTOP) right after the
// shop refunded, before it records the receipt, and stays frozen past its
// lease. Replica B claims the run, finds the refund in the shop's register and
// finishes the run without refunding again. When A wakes up, its late receipt
// is refused and it says so; the shop still holds one refund.
func TestReplicaPausedPastItsLease(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the process state from /proc")
	}
	c := newCluster(t, 2)
	a := c.start(0, "replica-a", "SIGNOFF_LEASE_TTL=3s", "SIGNOFF_FAILPOINT=after-effect:stop")

	body, err := os.ReadFile(fixture("refund-double-charge.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.ParseProposal(body)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.submit(p)
	if err != nil {
		t.Fatal(err)
	}
	id, key := v.ID, v.ID+"/1"

	// The click goes to A, whose worker executes the run and freezes. The
	// whole process freezes, so the answer to the click may be caught in it
	// until A wakes up: it is read at the end.
	form := interaction(readSlackFixture(t, "block_actions_approve.json"), v, lead1, "")
	answered := make(chan error, 1)
	go func() {
		status, resp, err := c.postTo(context.Background(), a.addr, form)
		if err == nil && (status != http.StatusOK || resp != "") {
			err = fmt.Errorf("answered %d %q", status, resp)
		}
		answered <- err
	}()
	eventually(t, "replica-a to freeze after the refund", 30*time.Second, func() bool {
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("approve at replica-a: %v", err)
			}
			answered <- nil
		default:
		}
		if !a.running() {
			t.Fatalf("replica-a exited: %v", a.waitErr)
		}
		st, err := procState(a.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st == 'T'
	})
	// Frozen between the effect and the receipt: the shop refunded, signoff
	// does not know yet, and A's lease is on the run.
	refund := c.oneRefund(t, key)
	rs := c.list(t, record.StatusExecuting)
	if len(rs) != 1 || rs[0].ID != id || rs[0].LeaseOwner != "replica-a" {
		t.Fatalf("executing runs while replica-a is frozen: %+v", rs)
	}
	if ops := c.get(t, id).Operations; len(ops) != 1 || ops[0].Status != record.OpPending || ops[0].Attempts != 1 || len(ops[0].Receipt) != 0 {
		t.Fatalf("operations while replica-a is frozen: %+v", ops)
	}

	// B starts once A is frozen, and takes the run over when A's lease runs out.
	b := c.start(1, "replica-b", "SIGNOFF_LEASE_TTL=3s")
	eventually(t, "replica-b to finish the run", 30*time.Second, func() bool { return c.get(t, id).Status == record.StatusDone })
	checkFinishedByB := func(when string) {
		t.Helper()
		v := c.get(t, id)
		if v.Status != record.StatusDone || len(v.Decisions) != 1 || v.Decisions[0].By != lead1 || v.Decisions[0].Via != "slack" {
			t.Errorf("%s: status %s, decisions %+v", when, v.Status, v.Decisions)
		}
		if len(v.Operations) != 1 || v.Operations[0].Status != record.OpCommitted || v.Operations[0].Attempts != 1 ||
			receiptID(t, v.Operations[0].Receipt) != refund.ID {
			t.Errorf("%s: operations %+v; the shop's refund is %s", when, v.Operations, refund.ID)
		}
		audit := c.auditActions(t, id)
		if rec := audit[record.EventReconciled]; len(rec) != 1 || rec[0]["owner"] != "replica-b" || rec[0]["receipt"] != refund.ID {
			t.Errorf("%s: reconciled events %+v, want one by replica-b with receipt %s", when, rec, refund.ID)
		}
		if ex := audit[record.EventExecuted]; len(ex) != 0 {
			t.Errorf("%s: executed events %+v, want none: the refund was found, not made again", when, ex)
		}
		if f := audit[record.EventFinished]; len(f) != 1 {
			t.Errorf("%s: finished %d times", when, len(f))
		}
	}
	checkFinishedByB("after replica-b")
	c.oneRefund(t, key)

	// A wakes up: its receipt is refused, and it says so.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica-a to report its late write refused", 30*time.Second, func() bool {
		return len(a.out.lines("late write refused", "run_id="+id, "owner=replica-a")) == 1
	})
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("approve at replica-a: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("replica-a never answered the click")
	}
	checkFinishedByB("after replica-a woke up")
	c.oneRefund(t, key)
	c.verify(t, 1)

	a.stop(t)
	b.stop(t)
	if l := b.out.lines("late write refused"); len(l) != 0 {
		t.Errorf("replica-b had writes refused: %q", l)
	}
}

// oneRefund asserts that the shop made exactly one change, a refund under key, and returns it.
func (c *cluster) oneRefund(t *testing.T, key string) demo.Change {
	t.Helper()
	ch := c.changes(t)
	if len(ch) != 1 || ch[0].Kind != demo.KindRefund || ch[0].Key != key {
		t.Fatalf("the shop's changes are %+v, want one refund under %s", ch, key)
	}
	return ch[0]
}
