package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/demo"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/internal/clocktest"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage/counting"
	"github.com/signoff-dev/signoff/storage/sqlite"
	"github.com/signoff-dev/signoff/workflow"
)

// fakeSlackActions records what the handlers asked of Slack.
type fakeSlackActions struct {
	mu         sync.Mutex
	views      []openedView
	ephemerals []ephemeral
	viewErr    error
}

var _ SlackActions = (*fakeSlackActions)(nil)

type openedView struct {
	Trigger string
	View    slack.ModalViewRequest
}

type ephemeral struct {
	Channel, User, Text string
	Blocks              []slack.Block
}

func (f *fakeSlackActions) OpenView(_ context.Context, trigger string, v slack.ModalViewRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.viewErr != nil {
		return f.viewErr
	}
	f.views = append(f.views, openedView{trigger, v})
	return nil
}

func (f *fakeSlackActions) PostEphemeral(_ context.Context, channel, user string, blocks []slack.Block, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ephemerals = append(f.ephemerals, ephemeral{channel, user, text, blocks})
	return nil
}

func (f *fakeSlackActions) Ephemerals() []ephemeral {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ephemeral(nil), f.ephemerals...)
}

func (f *fakeSlackActions) Views() []openedView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]openedView(nil), f.views...)
}

// slackHarness is signoff's Slack edge over loopback HTTP, on a real engine
// with a SQLite store and the demo shop in a temporary folder.
type slackHarness struct {
	t     testing.TB
	ctx   context.Context
	clock *clocktest.Clock
	eng   *workflow.Engine
	shop  *demo.Shop
	srv   *Server
	acts  *fakeSlackActions
	url   string
	http  *http.Client
	seq   atomic.Int64
	// store counts the engine's commits.
	store *counting.Store
}

type harnessOption func(*ServerConfig)

func newSlackHarness(t testing.TB, opts ...harnessOption) *slackHarness {
	t.Helper()
	return newSlackHarnessWith(t, config.Default(), opts...)
}

// newSlackHarnessWith is newSlackHarness on another config.
func newSlackHarnessWith(t testing.TB, cfg *config.Config, opts ...harnessOption) *slackHarness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	clock := clocktest.New(hStart)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "signoff.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	counted := counting.New(store)
	shopDB, err := sqlite.OpenDB(filepath.Join(dir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shopDB.Close() })
	shop, err := demo.OpenShop(ctx, shopDB, clock)
	if err != nil {
		t.Fatal(err)
	}
	execs, schemas := demo.Executors(shop, "signoff"), demo.Schemas()
	actions := map[string]*workflow.ActionSpec{}
	for name, ac := range cfg.Actions {
		spec, err := workflow.NewActionSpec(name, schemas[name], execs[name], ac.Redact)
		if err != nil {
			t.Fatal(err)
		}
		actions[name] = spec
	}
	eng, err := workflow.New(workflow.Config{Store: counted, Policy: cfg.Policy, Roles: cfg.Roles, Actions: actions, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	acts := &fakeSlackActions{}
	scfg := ServerConfig{
		Engine: eng, SigningSecret: hSecret, AppID: hAppID, TeamID: hTeamID, EnterpriseID: hEnterpriseID,
		Clock: clock, Slack: acts,
	}
	for _, o := range opts {
		o(&scfg)
	}
	srv, err := NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	srv.Register(e)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return &slackHarness{t: t, ctx: ctx, clock: clock, eng: eng, shop: shop, srv: srv, acts: acts, url: ts.URL, http: ts.Client(), store: counted}
}

// submit starts a run from an example proposal (fixtures/proposals) asked by
// requester ("" keeps the proposal's), and returns it waiting for approval.
func (h *slackHarness) submit(name, requester string) *workflow.RunView {
	h.t.Helper()
	b, err := fixtures.Proposal(name)
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := workflow.ParseProposal(b)
	if err != nil {
		h.t.Fatal(err)
	}
	p.IdempotencyKey = fmt.Sprintf("%s-%d", p.IdempotencyKey, h.seq.Add(1))
	if requester != "" {
		p.Requester = record.Person{ID: requester}
	}
	run, err := h.eng.Submit(h.ctx, p)
	if err != nil {
		h.t.Fatal(err)
	}
	if run.Status != record.StatusWaitingApproval {
		h.t.Fatalf("submitted %s: %s, want waiting_approval", name, run.Status)
	}
	return h.get(run.ID)
}

func (h *slackHarness) get(id string) *workflow.RunView {
	h.t.Helper()
	v, err := h.eng.Get(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// snapshot is everything a refused request must leave as it was: the run as
// `show --json` prints it and the shop's changes.
func (h *slackHarness) snapshot(id string) string {
	h.t.Helper()
	v, err := json.Marshal(h.get(id))
	if err != nil {
		h.t.Fatal(err)
	}
	ch, err := h.shop.Changes(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	c, _ := json.Marshal(ch)
	return string(v) + "\n" + string(c)
}

// post sends body with headers to path and returns the status and body.
func (h *slackHarness) post(path string, body []byte, hdr http.Header) (int, string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = hdr
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// click posts a signed interaction payload now.
func (h *slackHarness) click(payload []byte) (int, string) {
	h.t.Helper()
	body := formBody(payload)
	return h.post("/slack/interactions", body, signed(hSecret, h.clock.Now().Unix(), body))
}

// command posts a signed slash command form now.
func (h *slackHarness) command(form []byte) (int, string) {
	h.t.Helper()
	return h.post("/slack/commands", form, signed(hSecret, h.clock.Now().Unix(), form))
}

// runsCommand is /runs text from user, through the recorded form fixture.
func (h *slackHarness) runsCommand(user, text string) (int, commandReply) {
	h.t.Helper()
	return h.slashCommand(user, "/runs", text)
}

// slashCommand is runsCommand for a command of any name.
func (h *slackHarness) slashCommand(user, command, text string) (int, commandReply) {
	h.t.Helper()
	form := fixture(h.t, "slash_runs.form", Ref{}, user, map[string]string{"TEXT": text})
	form = bytes.Replace(form, []byte("&command=%2Fruns&"), []byte("&command="+url.QueryEscape(command)+"&"), 1)
	status, body := h.command(form)
	var r commandReply
	if status == http.StatusOK {
		var raw struct {
			ResponseType string            `json:"response_type"`
			Text         string            `json:"text"`
			Blocks       []json.RawMessage `json:"blocks"`
		}
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			h.t.Fatalf("reply %q: %v", body, err)
		}
		r.ResponseType, r.Text = raw.ResponseType, raw.Text
		for _, b := range raw.Blocks {
			r.Blocks = append(r.Blocks, rawBlock(b))
		}
	}
	return status, r
}

// rawBlock keeps a block as JSON: enough to look for text in a reply.
type rawBlock json.RawMessage

func (rawBlock) BlockType() slack.MessageBlockType { return "raw" }
func (rawBlock) ID() string                        { return "" }

func (r rawBlock) MarshalJSON() ([]byte, error) { return r, nil }

// replyText is everything a reply shows, for assertions.
func replyText(r commandReply) string {
	var b strings.Builder
	b.WriteString(r.Text)
	for _, bl := range r.Blocks {
		j, _ := json.Marshal(bl)
		b.WriteString("\n" + string(j))
	}
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(b.String())
}
