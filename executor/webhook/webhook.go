// Package webhook is the executor that carries out an action by calling a
// team's own HTTP service: a POST signed as the Standard Webhooks 1.0
// specification says, with the operation's idempotency key, and a lookup URL
// that tells after a crash whether that key happened. The contract a target
// must honour is in docs/executors.md; the status codes map to
// the engine's classes as follows:
//
//	2xx                          done: the JSON body is the receipt
//	4xx but 408 and 429          refused, nothing happened
//	429, 503 with Retry-After    nothing happened: retry after it
//	nothing sent (refused conn.) nothing happened: retry
//	other 5xx, 408, 3xx, timeout outcome unknown: ask lookup_url
//
// Arguments travel only in the body, never in the URL or a header. Redirects
// are not followed; the secret is never logged or stored.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/workflow"
)

// Defaults and limits.
const (
	DefaultTimeout = 10 * time.Second
	// MaxReceipt bounds the body kept as a receipt; a target's answer is a
	// record, not a payload.
	MaxReceipt = 64 << 10
	// maxMessage bounds the part of a refusal shown to people.
	maxMessage = 500
	// KeyPlaceholder is replaced in LookupURL by the escaped idempotency key.
	KeyPlaceholder = "{key}"
)

// Config is one action's webhook target.
type Config struct {
	URL       string // POST here to execute
	LookupURL string // optional: GET, with {key}, says whether a key happened
	CheckURL  string // optional: POST, read-only, at submit and before executing
	Keys      [][]byte
	Timeout   time.Duration // per request; DefaultTimeout when zero
	// Client sends the requests; nil means one with Timeout that follows no
	// redirect. A given client's redirect policy is replaced by the same rule.
	Client *http.Client
	Clock  workflow.Clock // the signature's timestamp; workflow.SystemClock when nil
}

// Executor calls one action's target. It is a workflow.CallExecutor.
type Executor struct {
	action string
	cfg    Config
	client *http.Client
}

var _ workflow.CallExecutor = (*Executor)(nil)

// New checks cfg and returns the executor of action.
func New(action string, cfg Config) (*Executor, error) {
	if err := CheckURL(cfg.URL, false); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if cfg.LookupURL != "" {
		if err := CheckURL(cfg.LookupURL, true); err != nil {
			return nil, fmt.Errorf("lookup_url: %w", err)
		}
	}
	if cfg.CheckURL != "" {
		if err := CheckURL(cfg.CheckURL, false); err != nil {
			return nil, fmt.Errorf("check_url: %w", err)
		}
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("no signing key")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = workflow.SystemClock{}
	}
	client := &http.Client{Timeout: cfg.Timeout}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Executor{action: action, cfg: cfg, client: client}, nil
}

// CheckURL says what is wrong with a target URL: it must be absolute http or
// https with a host, and carry no credentials (they belong in the secret).
// A lookup URL must contain {key} exactly once.
func CheckURL(raw string, lookup bool) error {
	if raw == "" {
		return errors.New("required")
	}
	u, err := url.Parse(strings.Replace(raw, KeyPlaceholder, "KEY", 1))
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("want an http:// or https:// URL, got %q", u.Scheme+":")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if u.User != nil {
		return errors.New("credentials do not belong in the URL: the request is signed with the secret")
	}
	if u.Fragment != "" {
		return errors.New("a fragment is never sent; remove it")
	}
	if n := strings.Count(raw, KeyPlaceholder); lookup && n != 1 {
		return fmt.Errorf("must contain %s once, where the idempotency key goes", KeyPlaceholder)
	} else if !lookup && n > 0 {
		return fmt.Errorf("%s belongs only in lookup_url", KeyPlaceholder)
	}
	return nil
}

// Plaintext reports whether raw is an http:// URL to another machine: its
// requests and answers cross the network readable by anyone on the way.
func Plaintext(raw string) bool {
	u, err := url.Parse(strings.Replace(raw, KeyPlaceholder, "KEY", 1))
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// Body is what the target receives on execute.
type Body struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunID          string          `json:"run_id"`
	Action         string          `json:"action"`
	Args           json.RawMessage `json:"args"`
	Fingerprint    string          `json:"fingerprint"`
	ApprovedBy     []string        `json:"approved_by"`
	Attempt        int             `json:"attempt"`
}

// CheckBody is what check_url receives: no key, since nothing is to happen.
type CheckBody struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args"`
}

// Check asks check_url whether the action could succeed now. A 4xx is a
// failed check (permanent); anything else but 2xx may be retried.
func (x *Executor) Check(ctx context.Context, a record.Action) error {
	if x.cfg.CheckURL == "" {
		return nil
	}
	body, err := json.Marshal(CheckBody{Action: a.Name, Args: args(a.Args)})
	if err != nil {
		return workflow.Permanent(fmt.Errorf("encode check of %s: %w", a.Name, err))
	}
	res, serr := x.send(ctx, http.MethodPost, x.cfg.CheckURL, "chk_"+randomID(), "", body)
	if serr != nil {
		return fmt.Errorf("check %s: %w", a.Name, serr.err)
	}
	switch {
	case res.status/100 == 2:
		return nil
	case refusal(res.status):
		return workflow.Permanent(fmt.Errorf("check %s failed (%d): %s", a.Name, res.status, res.message()))
	}
	return fmt.Errorf("check %s: the target answered %d: %s", a.Name, res.status, res.message())
}

// Execute performs the action under key; the run id is the key's prefix. The
// engine calls ExecuteCall, which also names the approvers and the attempt.
func (x *Executor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	return x.ExecuteCall(ctx, workflow.CallFor(key, a))
}

// ExecuteCall checks again (when there is a check_url) and then POSTs the call.
func (x *Executor) ExecuteCall(ctx context.Context, c workflow.Call) (record.Receipt, error) {
	// The world may have moved since submit: the check is asked again right
	// before the write. Nothing has been sent yet, so any failure but a
	// refusal is safe to retry.
	if err := x.Check(ctx, c.Action); err != nil {
		if workflow.Classify(err) == workflow.ClassPermanent {
			return record.Receipt{}, err
		}
		return record.Receipt{}, workflow.Transient(err)
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
	// webhook-id is the key: the same message on every attempt, as the
	// specification asks of retries.
	res, serr := x.send(ctx, http.MethodPost, x.cfg.URL, c.Key, c.Key, body)
	if serr != nil {
		if !serr.sent {
			return record.Receipt{}, workflow.Transient(fmt.Errorf("execute %s: nothing was sent: %w", c.Key, serr.err))
		}
		return record.Receipt{}, fmt.Errorf("execute %s: %w", c.Key, serr.err)
	}
	switch {
	case res.status/100 == 2:
		return res.receipt(c.Key), nil
	case refusal(res.status):
		return record.Receipt{}, workflow.Permanent(fmt.Errorf("%s (%d)", res.message(), res.status))
	case (res.status == http.StatusTooManyRequests || res.status == http.StatusServiceUnavailable) && res.retryAfter > 0:
		return record.Receipt{}, workflow.RetryAfter(fmt.Errorf("execute %s: the target answered %d, retry after %v", c.Key, res.status, res.retryAfter), res.retryAfter)
	case res.status == http.StatusTooManyRequests:
		return record.Receipt{}, workflow.Transient(fmt.Errorf("execute %s: the target answered 429", c.Key))
	}
	return record.Receipt{}, fmt.Errorf("execute %s: the target answered %d: %s", c.Key, res.status, res.message())
}

// Lookup asks lookup_url whether key happened. Without one, the answer is
// "not done": the same key is sent again, and the contract obliges the target
// to answer a repeated key with its first result.
func (x *Executor) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	if x.cfg.LookupURL == "" {
		return record.Receipt{}, false, nil
	}
	u := strings.Replace(x.cfg.LookupURL, KeyPlaceholder, url.PathEscape(key), 1)
	res, serr := x.send(ctx, http.MethodGet, u, "lookup_"+randomID(), key, nil)
	if serr != nil {
		return record.Receipt{}, false, fmt.Errorf("look up %s: %w", key, serr.err)
	}
	switch {
	case res.status == http.StatusOK:
		return res.receipt(key), true, nil
	case res.status == http.StatusNotFound:
		return record.Receipt{}, false, nil
	case res.retryAfter > 0:
		// Still in progress (503 or 409 with Retry-After): ask again then.
		return record.Receipt{}, false, workflow.RetryAfter(fmt.Errorf("look up %s: the target answered %d", key, res.status), res.retryAfter)
	case refusal(res.status) && res.status != http.StatusConflict:
		// The target refuses to say: asking again would be refused again.
		return record.Receipt{}, false, workflow.Permanent(fmt.Errorf("look up %s: the target answered %d: %s", key, res.status, res.message()))
	}
	return record.Receipt{}, false, fmt.Errorf("look up %s: the target answered %d: %s", key, res.status, res.message())
}

// refusal: a 4xx says the request was refused and nothing happened, except
// 408 (the target gave up reading: unknown) and 429 (slow down).
func refusal(status int) bool {
	return status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

func args(a json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(a)) == 0 {
		return json.RawMessage("{}")
	}
	return a
}

// response is what is kept of an answer: the status, the capped body and the
// wait the target asked for.
type response struct {
	status     int
	body       []byte
	truncated  bool
	retryAfter time.Duration
}

// sendError is a request that got no answer; sent says whether any of it may
// have reached the target.
type sendError struct {
	err  error
	sent bool
}

func (x *Executor) send(ctx context.Context, method, target, id, key string, body []byte) (*response, *sendError) {
	// The transport reports from its own goroutine, which may outlive Do.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, target, bytes.NewReader(body))
	if err != nil {
		return nil, &sendError{err: fmt.Errorf("build request: %w", err)}
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
		// Without GetBody the transport cannot send the request again on
		// its own: it would, for one that carries an Idempotency-Key, when a
		// reused connection breaks. Every attempt is the engine's, counted
		// and reconciled; none is made behind its back.
		req.GetBody = nil
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "signoff")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	now := x.cfg.Clock.Now()
	req.Header.Set(stdwebhook.HeaderID, id)
	req.Header.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(stdwebhook.HeaderSignature, stdwebhook.Sign(x.cfg.Keys, id, now, body))
	resp, err := x.client.Do(req)
	if err != nil {
		// Nothing written (a refused connection, a failed handshake) reached
		// nobody. Once anything was written, even on a connection the
		// transport then retried on another, the target may have acted.
		return nil, &sendError{err: cleanURLError(err), sent: wrote.Load()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxReceipt+1))
	if err != nil {
		// The status arrived; the body did not. For a 2xx the target acted,
		// so the outcome is treated as unknown and reconciled.
		return nil, &sendError{err: fmt.Errorf("read the answer (%d): %w", resp.StatusCode, cleanURLError(err)), sent: true}
	}
	r := &response{status: resp.StatusCode, body: b}
	if len(b) > MaxReceipt {
		r.body, r.truncated = b[:MaxReceipt], true
	}
	r.retryAfter = stdwebhook.ParseRetryAfter(resp.Header.Get("Retry-After"), now, workflow.MaxRetryAfter)
	return r, nil
}

// cleanURLError drops the URL from a transport error: people read it, and a
// lookup URL carries the key escaped; the operation already names the key.
func cleanURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// receipt turns a 2xx body into a receipt: its "id" names it when it is a
// string, else the key does; a body that is not JSON is kept as text.
func (r *response) receipt(key string) record.Receipt {
	rc := record.Receipt{ID: key}
	body := bytes.TrimSpace(r.body)
	if len(body) == 0 {
		return rc
	}
	if !r.truncated && json.Valid(body) {
		var head struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(body, &head) == nil {
			if s, ok := head.ID.(string); ok && s != "" && len(s) <= 200 {
				rc.ID = s
			}
		}
		rc.Detail = json.RawMessage(bytes.Clone(body))
		return rc
	}
	detail, _ := json.Marshal(map[string]any{"text": strings.ToValidUTF8(string(body), "\uFFFD"), "truncated": r.truncated})
	rc.Detail = detail
	return rc
}

// message is the part of a refusal people read: the body's "message" or
// "error" when it is JSON, else its text, shortened.
func (r *response) message() string {
	var m struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	text := string(bytes.TrimSpace(r.body))
	if json.Unmarshal(r.body, &m) == nil {
		if s, ok := m.Message.(string); ok && s != "" {
			text = s
		} else if s, ok := m.Error.(string); ok && s != "" {
			text = s
		}
	}
	if text == "" {
		return http.StatusText(r.status)
	}
	if len(text) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return strings.ToValidUTF8(text, "\uFFFD")
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
