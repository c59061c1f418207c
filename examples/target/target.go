// Package target is a reference target for signoff's webhook executor: a
// small HTTP service a team can copy and put its own action behind. It
// verifies the Standard Webhooks signature, keeps a ledger keyed by the
// Idempotency-Key (a repeated key gets the first result and changes nothing),
// answers the lookup URL, and has switches for the ways a real service fails,
// so that a test (or a person at a terminal) can watch signoff cope.
//
// It uses the standard library only, on purpose: it is meant to be read.
//
// Routes:
//
//	POST /execute           do the action once per Idempotency-Key
//	GET  /operations/{key}  200 + the receipt, or 404: never happened
//	POST /check             read-only: 200 if the action could run now, 422 if not
package target

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault is a way the next execute request fails.
type Fault string

// The faults. Each says whether the action happened, which is what signoff
// must get right.
const (
	// DropAfterCommit does the action, then closes the connection unanswered.
	DropAfterCommit Fault = "drop-after-commit"
	// FailAfterCommit does the action, then answers 500.
	FailAfterCommit Fault = "500-after-commit"
	// FailBeforeCommit answers 500 without doing anything.
	FailBeforeCommit Fault = "500-before-commit"
	// SlowAfterCommit does the action, then answers only once the caller has
	// given up (its timeout), as an overloaded service would.
	SlowAfterCommit Fault = "slow-after-commit"
	// RateLimited answers 429 with Retry-After without doing anything.
	RateLimited Fault = "429"
	// Refuse answers 409 with a message: refused, nothing happened.
	Refuse Fault = "409"
)

// Faults lists every fault, for flags and docs.
var Faults = []Fault{DropAfterCommit, FailAfterCommit, FailBeforeCommit, SlowAfterCommit, RateLimited, Refuse}

// Request is the body signoff POSTs to /execute.
type Request struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunID          string          `json:"run_id"`
	Action         string          `json:"action"`
	Args           json.RawMessage `json:"args"`
	Fingerprint    string          `json:"fingerprint"`
	ApprovedBy     []string        `json:"approved_by"`
	Attempt        int             `json:"attempt"`
}

// Entry is one operation in the ledger: what was done, once.
type Entry struct {
	Key     string          `json:"key"`
	Action  string          `json:"action"`
	Args    json.RawMessage `json:"args"`
	Receipt json.RawMessage `json:"receipt"`
}

// Received is one request that reached the handler, for tests and logs.
type Received struct {
	Path           string
	IdempotencyKey string // the header
	SignatureOK    bool
	Body           []byte
}

// Target is the service. Its zero value is not usable: use New.
type Target struct {
	keys       [][]byte
	now        func() time.Time
	ledgerFile string

	mu         sync.Mutex
	ledger     map[string]Entry
	order      []string
	inflight   map[string]bool
	faults     []Fault
	refusal    string
	retryAfter int
	lookupDown int
	// lookupRefuse makes the next lookups answer 403: a register that will
	// not say, which proves nothing.
	lookupRefuse int
	checkFails   string
	received     []Received
	// work is what each action takes before it is done (see SetWork);
	// nil: it is done at once.
	work func()
}

// New makes a target that accepts messages signed with any of secrets
// (whsec_… values). ledgerFile, when not empty, keeps the ledger across
// restarts (one JSON entry a line, synced before each answer).
func New(secrets []string, ledgerFile string) (*Target, error) {
	t := &Target{now: time.Now, ledgerFile: ledgerFile, ledger: map[string]Entry{}, inflight: map[string]bool{}, retryAfter: 1}
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) == 0 {
			return nil, errors.New("a secret is not whsec_<base64>")
		}
		t.keys = append(t.keys, key)
	}
	if len(t.keys) == 0 {
		return nil, errors.New("no secret")
	}
	if ledgerFile != "" {
		if err := t.load(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// SetWork makes every action take d, as a slow deploy does. The action goes
// on when the request that started it gives up (signoff's timeout): its
// lookup answers 503 with Retry-After ("still in progress") until it is
// done, and 200 with the receipt then.
func (t *Target) SetWork(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.work = func() { time.Sleep(d) }
	if d <= 0 {
		t.work = nil
	}
}

// HoldWork makes every action wait, in progress, until release is called:
// a test's slow deploy, whose end the test decides.
func (t *Target) HoldWork() (release func()) {
	done := make(chan struct{})
	var once sync.Once
	t.mu.Lock()
	t.work = func() { <-done }
	t.mu.Unlock()
	return func() { once.Do(func() { close(done) }) }
}

// Fail makes the next execute requests fail as faults say, one each.
func (t *Target) Fail(faults ...Fault) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faults = append(t.faults, faults...)
}

// SetRefusal sets the message of the Refuse fault.
func (t *Target) SetRefusal(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refusal = msg
}

// SetRetryAfter sets the seconds RateLimited asks to wait (default 1).
func (t *Target) SetRetryAfter(seconds int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retryAfter = seconds
}

// LookupDown makes the next n lookups answer 503, as a register that is down
// for a while.
func (t *Target) LookupDown(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookupDown = n
}

// LookupRefuses makes the next n lookups answer 403, as a register that
// will not say what a key did: signoff cannot prove the outcome, and a
// person must resolve the run.
func (t *Target) LookupRefuses(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lookupRefuse = n
}

// CheckFails makes /check answer 422 with msg ("" to pass again).
func (t *Target) CheckFails(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checkFails = msg
}

// Ledger returns the operations done, in order: each is one effect.
func (t *Target) Ledger() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.order))
	for _, k := range t.order {
		out = append(out, t.ledger[k])
	}
	return out
}

// Received returns every request that reached the handler.
func (t *Target) Received() []Received {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Received(nil), t.received...)
}

// Handler serves the routes.
func (t *Target) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", t.execute)
	mux.HandleFunc("GET /operations/{key...}", t.lookup)
	mux.HandleFunc("POST /check", t.check)
	return mux
}

// maxReceived bounds the requests kept for Received.
const maxReceived = 1000

// tolerance is how far a signature's timestamp may be from now: the
// specification's libraries use five minutes.
const tolerance = 5 * time.Minute

// verify reads the body and checks the signature over it. Nothing in a
// request is trusted before this passes.
func (t *Target) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, `{"message":"cannot read the body"}`, http.StatusBadRequest)
		return nil, false
	}
	ok := t.signatureOK(r.Header, body)
	t.mu.Lock()
	t.received = append(t.received, Received{Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"), SignatureOK: ok, Body: body})
	if len(t.received) > maxReceived {
		t.received = t.received[len(t.received)-maxReceived:] // a long-running target keeps the latest
	}
	t.mu.Unlock()
	if !ok {
		answer(w, http.StatusUnauthorized, map[string]string{"message": "invalid signature"})
		return nil, false
	}
	return body, true
}

func (t *Target) signatureOK(h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return false
	}
	if d := t.now().Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return false // an old message replayed
	}
	signed := id + "." + ts + "." + string(body)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		got, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		for _, k := range t.keys {
			m := hmac.New(sha256.New, k)
			m.Write([]byte(signed))
			if hmac.Equal([]byte(got), []byte(base64.StdEncoding.EncodeToString(m.Sum(nil)))) {
				return true
			}
		}
	}
	return false
}

func (t *Target) execute(w http.ResponseWriter, r *http.Request) {
	body, ok := t.verify(w, r)
	if !ok {
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil || req.IdempotencyKey == "" {
		answer(w, http.StatusBadRequest, map[string]string{"message": "want a JSON body with idempotency_key"})
		return
	}
	if req.IdempotencyKey != r.Header.Get("Idempotency-Key") {
		answer(w, http.StatusBadRequest, map[string]string{"message": "Idempotency-Key header and body disagree"})
		return
	}
	t.mu.Lock()
	if e, done := t.ledger[req.IdempotencyKey]; done {
		t.mu.Unlock()
		// A repeated key: the first result, and nothing else happens.
		if !sameJSON(e.Args, req.Args) {
			answer(w, http.StatusUnprocessableEntity, map[string]string{"message": "this key was used with other arguments"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(e.Receipt)
		return
	}
	if t.inflight[req.IdempotencyKey] {
		t.mu.Unlock()
		// The first request with this key is still at work: nothing happens
		// for this one; ask again shortly.
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, map[string]string{"message": "this key is in progress"})
		return
	}
	var fault Fault
	if len(t.faults) > 0 {
		fault, t.faults = t.faults[0], t.faults[1:]
	}
	switch fault {
	case RateLimited:
		wait := t.retryAfter
		t.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		answer(w, http.StatusTooManyRequests, map[string]string{"message": "slow down"})
		return
	case Refuse:
		msg := t.refusal
		t.mu.Unlock()
		if msg == "" {
			msg = "refused"
		}
		answer(w, http.StatusConflict, map[string]string{"message": msg})
		return
	case FailBeforeCommit:
		t.mu.Unlock()
		answer(w, http.StatusInternalServerError, map[string]string{"message": "internal error"})
		return
	}
	t.inflight[req.IdempotencyKey] = true
	work := t.work
	t.mu.Unlock()

	// The action itself would go here (deploy, rotate, email). This one only
	// writes the ledger, which is what makes a repeated key harmless. It
	// runs on its own, so that a caller that gives up does not stop it.
	type result struct {
		entry Entry
		err   error
	}
	doneCh := make(chan result, 1)
	go func() {
		if work != nil {
			work()
		}
		entry, err := t.commit(req)
		t.mu.Lock()
		delete(t.inflight, req.IdempotencyKey)
		t.mu.Unlock()
		doneCh <- result{entry, err}
	}()
	var res result
	select {
	case res = <-doneCh:
	case <-r.Context().Done():
		return // the caller gave up; the action goes on, and its lookup will say
	}
	entry, err := res.entry, res.err
	if err != nil {
		answer(w, http.StatusInternalServerError, map[string]string{"message": "ledger: " + err.Error()})
		return
	}
	switch fault {
	case DropAfterCommit:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case FailAfterCommit:
		answer(w, http.StatusInternalServerError, map[string]string{"message": "internal error"})
		return
	case SlowAfterCommit:
		<-r.Context().Done() // the caller's timeout
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(entry.Receipt)
}

func (t *Target) commit(req Request) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.order) + 1
	rc, err := json.Marshal(map[string]any{
		"id": fmt.Sprintf("op-%d", n), "key": req.IdempotencyKey, "action": req.Action, "status": "done",
	})
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Key: req.IdempotencyKey, Action: req.Action, Args: req.Args, Receipt: rc}
	if err := t.persist(e); err != nil {
		return Entry{}, err
	}
	t.ledger[e.Key] = e
	t.order = append(t.order, e.Key)
	return e, nil
}

func (t *Target) lookup(w http.ResponseWriter, r *http.Request) {
	if _, ok := t.verify(w, r); !ok {
		return
	}
	key := r.PathValue("key")
	t.mu.Lock()
	down := t.lookupDown > 0
	if down {
		t.lookupDown--
	}
	refuse := !down && t.lookupRefuse > 0
	if refuse {
		t.lookupRefuse--
	}
	e, done := t.ledger[key]
	busy := t.inflight[key]
	t.mu.Unlock()
	switch {
	case down:
		answer(w, http.StatusServiceUnavailable, map[string]string{"message": "the ledger is unavailable"})
	case refuse:
		answer(w, http.StatusForbidden, map[string]string{"message": "this register does not say"})
	case busy:
		// Not 404: it may yet happen. 503 with Retry-After says "still in
		// progress": signoff asks again then, within its reconcile budget.
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, map[string]string{"message": "this key is in progress"})
	case done:
		w.Header().Set("Content-Type", "application/json")
		w.Write(e.Receipt)
	default:
		answer(w, http.StatusNotFound, map[string]string{"message": "no operation with this key"})
	}
}

func (t *Target) check(w http.ResponseWriter, r *http.Request) {
	if _, ok := t.verify(w, r); !ok {
		return
	}
	t.mu.Lock()
	msg := t.checkFails
	t.mu.Unlock()
	if msg != "" {
		answer(w, http.StatusUnprocessableEntity, map[string]string{"message": msg})
		return
	}
	answer(w, http.StatusOK, map[string]string{"status": "ok"})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// sameJSON compares two JSON values by meaning, not by spelling.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func (t *Target) load() error {
	f, err := os.Open(t.ledgerFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("ledger %s: %w", t.ledgerFile, err)
		}
		if _, dup := t.ledger[e.Key]; !dup {
			t.order = append(t.order, e.Key)
		}
		t.ledger[e.Key] = e
	}
	return sc.Err()
}

// persist appends e to the ledger file and syncs it before anyone is told.
func (t *Target) persist(e Entry) error {
	if t.ledgerFile == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(t.ledgerFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
