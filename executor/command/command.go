// Package command is the executor that carries out an action by running a
// program: argv, never a shell. The program reads the call as JSON on stdin
// (the same body the webhook executor POSTs) and finds the key in
// SIGNOFF_IDEMPOTENCY_KEY, the run in SIGNOFF_RUN_ID and the action in
// SIGNOFF_ACTION. Its environment holds those and only the variables the
// config lists, so signoff's own secrets never reach it.
//
// Its exit status says what happened:
//
//	0                      done: stdout (JSON) is the receipt
//	65 (ExitRefused)       refused, nothing happened
//	75 (ExitRetry)         certainly nothing happened: retry (EX_TEMPFAIL)
//	anything else, a signal or the timeout: outcome unknown
//
// An unknown outcome is reconciled with the lookup program: exit 0 and a
// receipt on stdout = it happened, 66 (ExitNotFound) = it certainly did not.
// stderr, capped, goes into the error people read.
//
// signoff starts the program through a launcher, itself started again (see
// MaybeLaunch): the launcher is the subreaper of everything the program
// starts and, when the program exits or is killed at the timeout, it kills
// whatever is left, setsid or not, so that a call ends with all its
// processes. The program is judged by its own exit status, not by when its
// output closes. On Linux the program is confined with Landlock to the paths
// the config lists (see Rule), with no_new_privs, and optionally as another
// user; the store and the keys are never among those paths.
package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// The exit codes of the contract.
const (
	ExitRefused  = 65 // EX_DATAERR: the target refused; nothing happened
	ExitNotFound = 66 // EX_NOINPUT: (lookup) no operation with this key
	ExitRetry    = 75 // EX_TEMPFAIL: nothing happened; try again later
)

// Limits.
const (
	DefaultTimeout = 30 * time.Second
	MaxReceipt     = 64 << 10 // stdout kept as the receipt
	MaxStderr      = 4 << 10  // stderr kept for people
	// Grace is how long a call waits for the launcher once the program has
	// exited or was told to stop, and for its output to close: the launcher
	// ends every process below it, so only a launcher that cannot exceeds it.
	Grace = 2 * time.Second
)

// Config is one action's program.
type Config struct {
	Command []string // argv; a relative path with a slash is taken from Dir
	Lookup  []string // optional: asks whether a key happened
	Check   []string // optional: read-only; 0 = ok, 65 = the check failed
	Dir     string   // working directory (the config file's folder)
	// Env is what the program's environment holds besides the SIGNOFF_
	// variables: names and values, resolved when the config was read.
	Env     []string
	Timeout time.Duration // per run; DefaultTimeout when zero
	// Read and Write are the paths the program may reach besides
	// DefaultRead, DefaultWrite and its own files (the programs, and the
	// files their arguments name): below Read it may read and run, below
	// Write also create, change and remove. Relative paths start at Dir.
	// Enforced with Landlock where the kernel has it (LandlockABI).
	Read, Write []string
	// Private are files no program may reach whatever Read and Write say:
	// the store and the integrity keys. A folder that holds one is granted
	// entry by entry, without it.
	Private []string
	// RunAs is the user the programs run as; nil: signoff's own.
	RunAs *User
}

// Executor runs one action's program. It is a workflow.CallExecutor.
type Executor struct {
	action string
	cfg    Config
	rules  []Rule
	// missing are the listed paths that do not exist, for a warning.
	missing []string
	abi     int // Landlock's ABI; 0: the programs run unconfined
}

var _ workflow.CallExecutor = (*Executor)(nil)

// New checks that the programs exist and can be run.
func New(action string, cfg Config) (*Executor, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("command: required (argv, e.g. [./bin/rotate-key])")
	}
	for _, p := range []struct {
		field string
		argv  *[]string
	}{{"command", &cfg.Command}, {"lookup", &cfg.Lookup}, {"check", &cfg.Check}} {
		if len(*p.argv) == 0 {
			continue
		}
		argv := append([]string(nil), *p.argv...)
		path, err := resolve(argv[0], cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.field, err)
		}
		argv[0] = path
		*p.argv = argv
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	rules, missing, err := pathRules(cfg)
	if err != nil {
		return nil, err
	}
	return &Executor{action: action, cfg: cfg, rules: rules, missing: missing, abi: LandlockABI()}, nil
}

// Confined reports whether the programs run confined to their paths: false
// where the kernel has no Landlock.
func (x *Executor) Confined() bool { return x.abi > 0 }

// Rules are the paths the programs may reach.
func (x *Executor) Rules() []Rule { return x.rules }

// Missing says which listed paths do not exist, each "field: …": left out
// of the rules, the programs cannot reach them.
func (x *Executor) Missing() []string { return x.missing }

// resolve finds the program: a path with a slash is relative to dir, a bare
// name is looked up in signoff's PATH, now, once.
func resolve(name, dir string) (string, error) {
	if name == "" {
		return "", errors.New("empty program name")
	}
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		// Join cleans "./prog" in dir "." to "prog", which LookPath would
		// then search for on PATH instead of in the config's folder.
		name = filepath.Join(dir, name)
		if !strings.Contains(name, "/") {
			name = "./" + name
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("cannot run %s: %v", name, errors.Unwrap(err))
	}
	if !filepath.IsAbs(path) {
		if path, err = filepath.Abs(path); err != nil {
			return "", err
		}
	}
	return path, nil
}

// Body is what the program reads on stdin.
type Body struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunID          string          `json:"run_id"`
	Action         string          `json:"action"`
	Args           json.RawMessage `json:"args"`
	Fingerprint    string          `json:"fingerprint"`
	ApprovedBy     []string        `json:"approved_by"`
	Attempt        int             `json:"attempt"`
}

// Check runs the check program, if any.
func (x *Executor) Check(ctx context.Context, a record.Action) error {
	if len(x.cfg.Check) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"action": a.Name, "args": args(a.Args)})
	if err != nil {
		return workflow.Permanent(fmt.Errorf("encode check of %s: %w", a.Name, err))
	}
	r := x.run(ctx, x.cfg.Check, body, "", "")
	switch {
	case r.code == 0:
		return nil
	case r.code == ExitRefused:
		return workflow.Permanent(fmt.Errorf("check %s failed%s", a.Name, r.says()))
	}
	return fmt.Errorf("check %s: %s%s", a.Name, r.how(), r.says())
}

// Execute runs the action under key; the run id is the key's prefix.
func (x *Executor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	return x.ExecuteCall(ctx, workflow.CallFor(key, a))
}

// ExecuteCall runs the program once.
func (x *Executor) ExecuteCall(ctx context.Context, c workflow.Call) (record.Receipt, error) {
	if err := x.Check(ctx, c.Action); err != nil {
		if workflow.Classify(err) == workflow.ClassPermanent {
			return record.Receipt{}, err
		}
		return record.Receipt{}, workflow.Transient(err) // the action was not started
	}
	approvers := c.ApprovedBy
	if approvers == nil {
		approvers = []string{}
	}
	body, err := json.Marshal(Body{
		IdempotencyKey: c.Key, RunID: c.RunID, Action: c.Action.Name, Args: args(c.Action.Args),
		Fingerprint: c.Fingerprint, ApprovedBy: approvers, Attempt: c.Attempt,
	})
	if err != nil {
		return record.Receipt{}, workflow.Permanent(fmt.Errorf("encode %s: %w", c.Key, err))
	}
	r := x.run(ctx, x.cfg.Command, body, c.Key, c.RunID)
	switch {
	case r.code == 0:
		return r.receipt(c.Key), nil
	case r.code == ExitRefused:
		return record.Receipt{}, workflow.Permanent(fmt.Errorf("%s refused (exit %d)%s", filepath.Base(x.cfg.Command[0]), r.code, r.says()))
	case r.code == ExitRetry:
		return record.Receipt{}, workflow.Transient(fmt.Errorf("execute %s: %s asks to retry (exit 75)%s", c.Key, filepath.Base(x.cfg.Command[0]), r.says()))
	case r.startErr != nil:
		// The program never started: nothing can have happened.
		return record.Receipt{}, workflow.Transient(fmt.Errorf("execute %s: %w", c.Key, r.startErr))
	}
	return record.Receipt{}, fmt.Errorf("execute %s: %s%s", c.Key, r.how(), r.says())
}

// Lookup runs the lookup program. Without one, the answer is "not done": the
// program runs again with the same key, and the contract obliges it to
// answer a repeated key with its first result.
func (x *Executor) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	if len(x.cfg.Lookup) == 0 {
		return record.Receipt{}, false, nil
	}
	run, _, _ := strings.Cut(key, "/")
	body, err := json.Marshal(map[string]string{"idempotency_key": key, "run_id": run, "action": x.action})
	if err != nil {
		return record.Receipt{}, false, err
	}
	r := x.run(ctx, x.cfg.Lookup, body, key, run)
	switch r.code {
	case 0:
		return r.receipt(key), true, nil
	case ExitNotFound:
		return record.Receipt{}, false, nil
	}
	return record.Receipt{}, false, fmt.Errorf("look up %s: %s%s", key, r.how(), r.says())
}

func args(a json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(a)) == 0 {
		return json.RawMessage("{}")
	}
	return a
}

// result is how a program ended and what it said.
type result struct {
	code     int // exit status; -1 for a signal, a timeout or no start
	signal   string
	timedOut time.Duration
	startErr error
	waitErr  error
	stdout   capped
	stderr   capped
}

func (x *Executor) run(ctx context.Context, argv []string, stdin []byte, key, runID string) *result {
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	r := &result{code: -1, stdout: capped{max: MaxReceipt}, stderr: capped{max: MaxStderr}}
	sp, err := json.Marshal(spec{Stage: stageReap, Argv: argv, Rules: x.rules, ABI: x.abi, RunAs: x.cfg.RunAs})
	if err != nil {
		r.startErr = err
		return r
	}
	status, statusW, err := os.Pipe()
	if err != nil {
		r.startErr = err
		return r
	}
	defer status.Close()
	cmd := exec.CommandContext(ctx, launcher)
	cmd.Args = []string{argv[0]}
	cmd.Dir = x.cfg.Dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	env := append([]string(nil), x.cfg.Env...)
	env = append(env, "SIGNOFF_ACTION="+x.action)
	if key != "" {
		env = append(env, "SIGNOFF_IDEMPOTENCY_KEY="+key, "SIGNOFF_RUN_ID="+runID)
	}
	cmd.Env = append(env, LaunchEnv+"="+string(sp))
	cmd.ExtraFiles = []*os.File{statusW}
	// Its own process group, away from a terminal's ^C: signoff says when.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// At the timeout the launcher kills the program and all it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = Grace
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		r.startErr = err
		return r
	}
	said := make(chan string, 1)
	go func() { said <- readAll(status, 4096) }()
	// An error here is the launcher's own (its output held open past the
	// grace, SIGKILL past it): the program's status is what it reported.
	waitErr := cmd.Wait()
	var st launchStatus
	if json.Unmarshal([]byte(<-said), &st) != nil {
		if ctx.Err() != nil {
			r.timedOut = x.cfg.Timeout
			return r
		}
		r.waitErr = fmt.Errorf("the launcher ended without saying how the program did: %v", waitErr)
		return r
	}
	switch {
	case st.Start != "":
		r.startErr = errors.New(st.Start)
	case st.Killed:
		r.timedOut = x.cfg.Timeout
	case st.Signal != "":
		r.signal = st.Signal
	default:
		r.code = st.Exit
	}
	return r
}

// how says how a program ended, for people.
func (r *result) how() string {
	switch {
	case r.timedOut > 0:
		return fmt.Sprintf("timed out after %v; it and every process it started were killed", r.timedOut)
	case r.signal != "":
		return "killed by " + r.signal
	case r.startErr != nil:
		return "did not start: " + r.startErr.Error()
	case r.waitErr != nil:
		return r.waitErr.Error()
	}
	return fmt.Sprintf("exit %d", r.code)
}

// says is the program's stderr, for people: ": <text>", or "".
func (r *result) says() string {
	s := strings.TrimSpace(strings.ToValidUTF8(r.stderr.String(), "\uFFFD"))
	if s == "" {
		return ""
	}
	return ": " + s
}

// receipt turns stdout into a receipt: its "id" names it when it is a
// string, else the key does; stdout that is not JSON is kept as text.
func (r *result) receipt(key string) record.Receipt {
	rc := record.Receipt{ID: key}
	out := bytes.TrimSpace(r.stdout.buf.Bytes())
	if len(out) == 0 {
		return rc
	}
	if !r.stdout.over && json.Valid(out) {
		var head struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(out, &head) == nil {
			if s, ok := head.ID.(string); ok && s != "" && len(s) <= 200 {
				rc.ID = s
			}
		}
		rc.Detail = json.RawMessage(bytes.Clone(out))
		return rc
	}
	detail, _ := json.Marshal(map[string]any{"text": strings.ToValidUTF8(string(out), "\uFFFD"), "truncated": r.stdout.over})
	rc.Detail = detail
	return rc
}

// capped keeps the first max bytes written and drops the rest, so that a
// chatty program cannot fill memory.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) > room {
		c.over = true
	}
	if room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String is what was kept; a rune cut by the cap becomes U+FFFD.
func (c *capped) String() string {
	s := strings.ToValidUTF8(c.buf.String(), "\uFFFD")
	if c.over {
		s += "…"
	}
	return s
}

// EnvFrom resolves the names a config lists into NAME=value pairs from
// getenv; a name that is not set is left out, so the program sees it unset.
func EnvFrom(names []string, getenv func(string) string) []string {
	var out []string
	for _, n := range names {
		if v := getenv(n); v != "" {
			out = append(out, n+"="+v)
		}
	}
	return out
}
