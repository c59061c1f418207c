package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/api/client"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// Tokens of the test server: the secret is the name.
const (
	tokAll    = "sk_all"    // agent:resolver, every scope
	tokRead   = "sk_read"   // agent:resolver, read only
	tokOther  = "sk_other"  // agent:other, every scope
	tokNobody = "sk_nobody" // configured for a requester who holds no role
	tokOps    = "sk_ops"    // U0LEAD, the highest role: resolve only
	tokLead   = "sk_lead"   // U0LEAD: force, review and read
	tokSec    = "sk_sec"    // U0SEC, a team_lead too: force and review
)

// callbackPrefix is the one callback allow-list entry of the test server.
const callbackPrefix = "https://agents.example/signoff/"

// deploySchema is what deploy takes; token is redacted.
const deploySchema = `{"type": "object", "additionalProperties": false, "required": ["service", "version"],
 "properties": {"service": {"type": "string", "minLength": 1}, "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"},
  "token": {"type": "string"}}}`

// recorder is an executor that succeeds, echoing the arguments in its
// receipt, and remembers the keys it ran.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) Check(context.Context, record.Action) error { return nil }
func (r *recorder) Execute(_ context.Context, key string, a record.Action) (record.Receipt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	// The target echoes what it was sent, nested, as real ones do.
	return record.Receipt{ID: "rcpt-" + key, Detail: json.RawMessage(`{"echo":` + string(a.Args) + `}`)}, nil
}

// unprovable is an executor whose every call loses its answer and whose
// register refuses to say: each run of it ends in needs_attention.
type unprovable struct{}

func (unprovable) Check(context.Context, record.Action) error { return nil }
func (unprovable) Execute(context.Context, string, record.Action) (record.Receipt, error) {
	return record.Receipt{}, errors.New("connection reset after sending")
}
func (unprovable) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, workflow.Permanent(errors.New("the register refuses to say"))
}

func (r *recorder) Lookup(context.Context, string) (record.Receipt, bool, error) {
	return record.Receipt{}, false, nil
}

type harness struct {
	t      *testing.T
	path   string // the store's file
	engine *workflow.Engine
	store  *sqlite.Store
	srv    *httptest.Server
	clock  *clocktest.Clock // the rate limiter's; it moves only when a test moves it
	conf   *conformance
	api    *api.Server
	config api.Config // what api was made with
}

type harnessOpts struct {
	rate       float64
	burst      int
	cursorKeys [][]byte
	// requirement, when set, is the deploys rule's composite approval.
	requirement *record.Requirement
	// noBreakGlass leaves the deploys rule without a break_glass.
	noBreakGlass bool
	// stepUp, when set, asks the deploys rule's approvals to be confirmed
	// on the web within it (and leaves it without a break_glass).
	stepUp record.Seconds
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "signoff.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	roles, err := policy.NewRoles([]policy.Role{
		{Name: "agent", Members: []string{"agent:resolver", "agent:other"}},
		{Name: "team_lead", Members: []string{"U0LEAD", "U0SEC"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	bg := &record.BreakGlass{Role: "team_lead", Review: record.BreakGlassReview{Role: "team_lead", Within: 3600}}
	if o.noBreakGlass || o.stepUp > 0 {
		bg = nil
	}
	pol, err := policy.New("r1", []policy.Rule{
		{Name: "deploys", When: `action.name == "deploy"`, Risk: "high",
			Approval:   &record.ApprovalSpec{Role: "team_lead", Count: 1, Expires: record.Seconds(3600), Requirement: o.requirement, StepUp: o.stepUp},
			BreakGlass: bg},
		{Name: "later-notes", When: `action.name == "note" && has(action.args.text) && action.args.text == "later"`, Risk: "low", Window: closedWindow()},
		{Name: "everything-else", When: "true", Risk: "low"},
	}, roles)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	deploy, err := workflow.NewActionSpec("deploy", []byte(deploySchema), rec, []string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	note, err := workflow.NewActionSpec("note", nil, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	wobble, err := workflow.NewActionSpec("wobble", nil, unprovable{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := workflow.New(workflow.Config{Store: st, Policy: pol, Roles: roles,
		Actions:          map[string]*workflow.ActionSpec{"deploy": deploy, "note": note, "wobble": wobble},
		CallbackAllowed:  func(u string) bool { return strings.HasPrefix(u, callbackPrefix) },
		CallbackPrefixes: []string{callbackPrefix}})
	if err != nil {
		t.Fatal(err)
	}
	tok := func(id, secret, requester string, scopes ...string) api.Token {
		return api.Token{ID: id, SHA256: sha256.Sum256([]byte(secret)), Requester: requester, Scopes: scopes}
	}
	all := []string{api.ScopeSubmit, api.ScopeRead, api.ScopeCancel, api.ScopeResolve, api.ScopeForce, api.ScopeReview}
	clk := clocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ac := api.Config{Engine: e, Clock: clk, Rate: o.rate, Burst: o.burst, CursorKeys: o.cursorKeys, Tokens: []api.Token{
		tok("all", tokAll, "agent:resolver", all...),
		tok("read", tokRead, "agent:resolver", api.ScopeRead),
		tok("other", tokOther, "agent:other", all...),
		tok("nobody", tokNobody, "agent:nobody", all...),
		tok("ops", tokOps, "U0LEAD", api.ScopeResolve),
		tok("lead", tokLead, "U0LEAD", api.ScopeForce, api.ScopeReview, api.ScopeRead),
		tok("sec", tokSec, "U0SEC", api.ScopeForce, api.ScopeReview),
	}}
	if ac.Rate == 0 {
		ac.Rate, ac.Burst = 1e6, 1e6
	}
	h, err := api.New(ac)
	if err != nil {
		t.Fatal(err)
	}
	conf := newConformance(t)
	srv := httptest.NewServer(conf.wrap(h))
	t.Cleanup(srv.Close)
	return &harness{t: t, path: path, engine: e, store: st, srv: srv, clock: clk, conf: conf, api: h, config: ac}
}

// replica is another API server on the harness's engine, as a second
// replica or the same server restarted, whose cursors are sealed with keys.
func (h *harness) replica(keys [][]byte) *client.Client {
	h.t.Helper()
	ac := h.config
	ac.CursorKeys = keys
	s, err := api.New(ac)
	if err != nil {
		h.t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	h.t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, tokAll, srv.Client())
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) client(token string) *client.Client {
	c, err := client.New(h.srv.URL, token, h.srv.Client())
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// answer is a raw response.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, a.body)
	}
	var p api.Problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("problem: %v: %s", err, a.body)
	}
	return p
}

// do sends a raw request. invalid says the request breaks the document on
// purpose: only its answer is held to it.
func (h *harness) do(method, path, token, contentType string, body []byte, invalid bool) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if invalid {
		req.Header.Set(invalidHeader, "1")
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// snapshot is everything a refusal must leave as it was.
type snapshot struct {
	Runs        []*record.Run
	Checkpoints map[string]int
	Audit       int
}

func (h *harness) snapshot() snapshot {
	h.t.Helper()
	s := snapshot{Checkpoints: map[string]int{}}
	err := h.store.View(context.Background(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		if s.Runs, err = tx.ListRuns(ctx, storage.RunFilter{}); err != nil {
			return err
		}
		for _, r := range s.Runs {
			cps, err := tx.Checkpoints(ctx, r.ID)
			if err != nil {
				return err
			}
			s.Checkpoints[r.ID] = len(cps)
		}
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{})
		s.Audit = len(evs)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (s snapshot) json(t *testing.T) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// invalidHeader marks a request that breaks the document on purpose.
const invalidHeader = "X-Test-Invalid-Request"

// conformance holds every request the tests make (unless marked) and every
// answer to api/openapi.yaml, and counts which operations and statuses were
// seen.
type conformance struct {
	t      *testing.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string][]int // operationId → statuses
}

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return doc
}

func newConformance(t *testing.T) *conformance {
	doc := loadDoc(t)
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &conformance{t: t, router: r, seen: map[string][]int{}}
}

func (c *conformance) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		// Check before answering, so that what a test sees was checked.
		defer func() {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}()

		op, errs := c.check(r, body, rec.Code, rec.Header(), rec.Body.Bytes(), r.Header.Get(invalidHeader) == "")
		for _, err := range errs {
			c.t.Errorf("%s %s → %d: %v\n%s", r.Method, r.URL, rec.Code, err, rec.Body.Bytes())
		}
		if op == "" {
			return
		}
		c.mu.Lock()
		if !slices.Contains(c.seen[op], rec.Code) {
			c.seen[op] = append(c.seen[op], rec.Code)
		}
		c.mu.Unlock()
	})
}

// check holds one exchange to the document: the request (when checkRequest)
// and the answer. It returns the operation ("" for an undocumented route).
func (c *conformance) check(r *http.Request, reqBody []byte, status int, header http.Header, body []byte, checkRequest bool) (string, []error) {
	ctx := context.Background()
	vr := r.Clone(ctx)
	vr.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.router.FindRoute(vr)
	if err != nil {
		// Not a documented route: the answer must still be a problem.
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			return "", []error{fmt.Errorf("undocumented route answered Content-Type %q, want problem+json", ct)}
		}
		return "", nil
	}
	var errs []error
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if checkRequest {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			errs = append(errs, fmt.Errorf("the request breaks openapi.yaml: %w", err))
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("the answer breaks openapi.yaml: %w", err))
	}
	return route.Operation.OperationID, errs
}

func deployProposal(key, version string) *workflow.Proposal {
	return &workflow.Proposal{
		TaskID: "T-1", Summary: "deploy api", IdempotencyKey: key,
		Actions: []record.Action{{Name: "deploy", Args: json.RawMessage(`{"service":"api","version":"` + version + `","token":"s3cret"}`)}},
	}
}
