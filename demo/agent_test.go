package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

func newState(runID, ticket string) *record.State {
	return &record.State{
		SchemaVersion: record.SchemaVersion,
		RunID:         runID,
		Workflow:      AgentWorkflow,
		TaskID:        ticket,
		Status:        record.StatusRunning,
		Requester:     record.Person{ID: "agent:resolver", Name: "Resolver agent"},
	}
}

// runAgent steps st to the end as the engine does, counting the steps.
func runAgent(t *testing.T, a *Agent, st *record.State) int {
	t.Helper()
	for steps := 1; steps <= 10; steps++ {
		done, err := a.Step(context.Background(), st)
		if err != nil {
			t.Fatalf("step %d: %v", st.Step+1, err)
		}
		st.Step++
		if done {
			return steps
		}
	}
	t.Fatal("the agent did not finish in 10 steps")
	return 0
}

// jsonEqual compares two JSON texts as values, so 119.00 and 119 or a
// different layout do not matter, but every field does.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestRecordedAgentProposals(t *testing.T) {
	tests := []struct {
		ticket  string
		tools   []string
		actions []record.Action
	}{
		{"T-65273", []string{"get_order", "get_payments"}, []record.Action{
			{Name: "request_refund", Args: []byte(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119.00,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)},
		}},
		{"T-90103", []string{"get_order"}, []record.Action{
			{Name: "reship_item", Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","quantity":1}`)},
			{Name: "create_return_label", Args: []byte(`{"order_id":"LK-640436","sku":"PLANTER","reason":"damaged","free_shipping":true}`)},
		}},
		{"T-90104", []string{"get_order", "get_payments"}, []record.Action{
			{Name: "request_refund", Args: []byte(`{"order_id":"LK-793996","payment_id":"PAY-793996-1","amount":9.95,"currency":"CAD","reason_code":"RFD-DEFECT"}`)},
		}},
	}
	if got := Tickets(); !reflect.DeepEqual(got, []string{"T-65273", "T-90103", "T-90104"}) {
		t.Errorf("Tickets() = %v", got)
	}
	for _, tt := range tests {
		t.Run(tt.ticket, func(t *testing.T) {
			s, _ := newShop(t)
			ctx := context.Background()
			st := newState("run-"+tt.ticket, tt.ticket)
			steps := runAgent(t, NewAgent(s), st)

			wantCalls := len(tt.tools) + 1
			if steps != wantCalls || st.ModelCalls != wantCalls {
				t.Errorf("%d steps and %d model calls, want %d of each", steps, st.ModelCalls, wantCalls)
			}
			if n, err := s.ModelCalls(ctx, st.RunID); err != nil || n != wantCalls {
				t.Errorf("the ledger has %d model calls (%v), want %d", n, err, wantCalls)
			}
			if len(st.Actions) != len(tt.actions) {
				t.Fatalf("actions = %+v, want %+v", st.Actions, tt.actions)
			}
			for i, a := range st.Actions {
				if a.Name != tt.actions[i].Name || !jsonEqual(t, a.Args, tt.actions[i].Args) {
					t.Errorf("action %d = %s %s, want %s %s", i, a.Name, a.Args, tt.actions[i].Name, tt.actions[i].Args)
				}
				if !json.Valid(a.Args) || bytes.ContainsAny(a.Args, "\n\t") {
					t.Errorf("action %d args are not compact JSON: %q", i, a.Args)
				}
			}
			if st.Summary == "" {
				t.Error("no summary")
			}
			var sources []string
			for _, e := range st.Evidence {
				sources = append(sources, e.Source)
				if !json.Valid(e.Data) {
					t.Errorf("evidence %s is not JSON: %s", e.Source, e.Data)
				}
			}
			if !reflect.DeepEqual(sources, tt.tools) {
				t.Errorf("evidence from %v, want %v", sources, tt.tools)
			}
			// user, then a call and its result per tool, then the proposal.
			if len(st.Messages) != 2+2*len(tt.tools) {
				t.Fatalf("%d messages, want %d", len(st.Messages), 2+2*len(tt.tools))
			}
			ticket, err := s.Ticket(ctx, tt.ticket)
			if err != nil {
				t.Fatal(err)
			}
			if m := st.Messages[0]; m.Role != "user" || !strings.Contains(m.Content, ticket.Body) {
				t.Errorf("first message %+v, want the ticket's text", m)
			}
			for i, tool := range tt.tools {
				call, res := st.Messages[1+2*i], st.Messages[2+2*i]
				if call.Role != "assistant" || call.Tool != tool || call.Content == "" || !json.Valid(call.Args) {
					t.Errorf("message %d = %+v, want the assistant calling %s", 1+2*i, call, tool)
				}
				if res.Role != "tool" || res.Tool != tool || !bytes.Equal(res.Result, st.Evidence[i].Data) {
					t.Errorf("message %d = %+v, want the result of %s", 2+2*i, res, tool)
				}
			}
			if changes := mustChanges(t, s); len(changes) != 0 {
				t.Errorf("the agent changed the shop: %+v", changes)
			}
			// The proposal passes the executors' read-only checks.
			exs := Executors(s, "signoff")
			for _, a := range st.Actions {
				if err := exs[a.Name].Check(ctx, a); err != nil {
					t.Errorf("check of proposed %s: %v", a.Name, err)
				}
			}
			// Asking for a step after the last turn is an error, not a new call.
			before, _ := encodeState(st)
			if _, err := NewAgent(s).Step(ctx, st); err == nil {
				t.Error("a step past the end of the transcript succeeded")
			}
			after, _ := encodeState(st)
			if !bytes.Equal(before, after) {
				t.Error("a failed step changed the state")
			}
			if n, _ := s.ModelCalls(ctx, st.RunID); n != wantCalls {
				t.Errorf("ledger has %d calls after a step past the end, want %d", n, wantCalls)
			}
		})
	}
}

// The example proposals are what the recorded agent proposes: the same
// actions and the same evidence, so a submitted proposal and an agent run of
// the same ticket show an approver the same thing.
func TestExampleProposalsAreTheAgentsProposals(t *testing.T) {
	type proposal struct {
		TaskID         string            `json:"task_id"`
		Requester      record.Person     `json:"requester"`
		Summary        string            `json:"summary"`
		Actions        []record.Action   `json:"actions"`
		Evidence       []record.Evidence `json:"evidence"`
		IdempotencyKey string            `json:"idempotency_key"`
	}
	for name, ticket := range map[string]string{
		"refund-double-charge": "T-65273",
		"reship-planter":       "T-90103",
		"small-refund":         "T-90104",
	} {
		t.Run(name, func(t *testing.T) {
			b, err := fixtures.Proposal(name)
			if err != nil {
				t.Fatal(err)
			}
			var p proposal
			if err := workflow.DecodeStrict(b, &p); err != nil {
				t.Fatalf("decode strictly: %v", err)
			}
			if p.TaskID != ticket || p.Requester.ID != "agent:resolver" || p.Requester.Name != "Resolver agent" || p.IdempotencyKey == "" {
				t.Errorf("proposal header = %+v", p)
			}
			s, _ := newShop(t)
			st := newState("run-1", ticket)
			runAgent(t, NewAgent(s), st)
			if p.Summary != st.Summary {
				t.Errorf("summary %q, the agent says %q", p.Summary, st.Summary)
			}
			if len(p.Actions) != len(st.Actions) {
				t.Fatalf("%d actions, the agent proposes %d", len(p.Actions), len(st.Actions))
			}
			for i := range p.Actions {
				if p.Actions[i].Name != st.Actions[i].Name || !jsonEqual(t, p.Actions[i].Args, st.Actions[i].Args) {
					t.Errorf("action %d = %s %s, the agent proposes %s %s", i, p.Actions[i].Name, p.Actions[i].Args, st.Actions[i].Name, st.Actions[i].Args)
				}
			}
			if len(p.Evidence) != len(st.Evidence) {
				t.Fatalf("%d pieces of evidence, the agent finds %d", len(p.Evidence), len(st.Evidence))
			}
			for i := range p.Evidence {
				if p.Evidence[i].Source != st.Evidence[i].Source || !jsonEqual(t, p.Evidence[i].Data, st.Evidence[i].Data) {
					t.Errorf("evidence %d = %s %s, the agent finds %s %s", i, p.Evidence[i].Source, p.Evidence[i].Data, st.Evidence[i].Source, st.Evidence[i].Data)
				}
			}
		})
	}
}

// A crash after any step: a new process decodes the checkpointed state,
// opens the shop again and continues. It proposes the same thing and makes
// the same number of model calls, by the run's count and by the ledger's.
func TestRecordedAgentResumesFromACheckpoint(t *testing.T) {
	for _, ticket := range Tickets() {
		t.Run(ticket, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "shop.db")
			c := newClock()
			s, err := OpenShop(ctx, openDB(t, path), c)
			if err != nil {
				t.Fatal(err)
			}
			whole := newState("run-whole", ticket)
			total := runAgent(t, NewAgent(s), whole)
			wantCalls, err := s.ModelCalls(ctx, "run-whole")
			if err != nil {
				t.Fatal(err)
			}
			wantState, err := encodeState(withRunID(whole, ""))
			if err != nil {
				t.Fatal(err)
			}

			for crashAfter := 1; crashAfter < total; crashAfter++ {
				runID := "run-crash-" + string(rune('0'+crashAfter))
				st := newState(runID, ticket)
				a := NewAgent(s)
				for range crashAfter {
					if done, err := a.Step(ctx, st); err != nil || done {
						t.Fatalf("step before the crash: done %v, err %v", done, err)
					}
					st.Step++
				}
				checkpoint, err := encodeState(st)
				if err != nil {
					t.Fatal(err)
				}

				// A new process: a new connection to the shop file, a new
				// agent, and only the checkpoint carried over.
				s2, err := OpenShop(ctx, openDB(t, path), c)
				if err != nil {
					t.Fatal(err)
				}
				resumed, err := decodeState(checkpoint)
				if err != nil {
					t.Fatalf("decode the checkpoint: %v", err)
				}
				steps := crashAfter + runAgent(t, NewAgent(s2), resumed)

				if steps != total || resumed.ModelCalls != whole.ModelCalls {
					t.Errorf("crash after step %d: %d steps and %d model calls, uninterrupted %d and %d",
						crashAfter, steps, resumed.ModelCalls, total, whole.ModelCalls)
				}
				if n, err := s2.ModelCalls(ctx, runID); err != nil || n != wantCalls {
					t.Errorf("crash after step %d: the ledger has %d model calls (%v), uninterrupted %d", crashAfter, n, err, wantCalls)
				}
				got, err := encodeState(withRunID(resumed, ""))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wantState) {
					t.Errorf("crash after step %d: the resumed state differs from the uninterrupted one:\n%s\n%s", crashAfter, got, wantState)
				}
			}
		})
	}
}

func withRunID(st *record.State, id string) *record.State {
	c := *st
	c.RunID = id
	return &c
}

func TestRecordedAgentUnknownTicket(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	st := newState("run-x", "T-00000")
	done, err := NewAgent(s).Step(ctx, st)
	if done || !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("unknown ticket: done %v, err %v; want ErrUnknownTicket", done, err)
	}
	if !strings.Contains(err.Error(), "T-00000") || !strings.Contains(err.Error(), "T-65273") {
		t.Errorf("message %q should name the ticket and the known ones", err)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Errorf("unknown ticket is not permanent: %v", err)
	}
	if st.ModelCalls != 0 || len(st.Messages) != 0 {
		t.Errorf("state changed: %+v", st)
	}
	if n, _ := s.ModelCalls(ctx, "run-x"); n != 0 {
		t.Errorf("%d model calls recorded for an unknown ticket", n)
	}
	for _, bad := range []string{"", "../fixtures", "transcripts/T-65273"} {
		if _, err := NewAgent(s).Step(ctx, newState("run-y", bad)); !errors.Is(err, ErrUnknownTicket) {
			t.Errorf("ticket %q: %v, want ErrUnknownTicket", bad, err)
		}
	}
}

// A step that fails leaves the state as it was, so the engine can run it
// again on the same state without skipping a turn.
func TestRecordedAgentFailedStepLeavesStateAlone(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "shop.db"))
	s, err := OpenShop(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := newState("run-1", "T-65273")
	if _, err := NewAgent(s).Step(ctx, st); err != nil {
		t.Fatal(err)
	}
	before, _ := encodeState(st)
	db.Close()
	if _, err := NewAgent(s).Step(ctx, st); err == nil {
		t.Fatal("a step with the shop closed succeeded")
	}
	after, _ := encodeState(st)
	if !bytes.Equal(before, after) {
		t.Errorf("a failed step changed the state:\n%s\n%s", before, after)
	}
}

func TestTranscriptsAreStrict(t *testing.T) {
	for _, ticket := range fixtures.TranscriptTickets() {
		if _, err := loadTranscript(ticket); err != nil {
			t.Errorf("%s: %v", ticket, err)
		}
	}
	good, err := fixtures.Transcript("T-90104")
	if err != nil {
		t.Fatal(err)
	}
	var tr transcript
	if err := workflow.DecodeStrict(bytes.Replace(good, []byte(`"model":`), []byte(`"temperature": 0, "model":`), 1), &tr); err == nil {
		t.Error("a transcript with an unknown field was accepted")
	}
	if err := workflow.DecodeStrict(bytes.Replace(good, []byte(`"model":`), []byte(`"model": "x", "model":`), 1), &tr); err == nil {
		t.Error("a transcript with a duplicate field was accepted")
	}
	bad := []struct {
		name string
		tr   transcript
	}{
		{"no turns", transcript{Ticket: Ticket{ID: "T-1", OrderID: "LK-1", Body: "x"}}},
		{"other ticket", transcript{Ticket: Ticket{ID: "T-2", OrderID: "LK-1", Body: "x"}, Turns: []turn{{Proposal: &proposal{}}}}},
		{"does not propose", transcript{Ticket: Ticket{ID: "T-1", OrderID: "LK-1", Body: "x"}, Turns: []turn{{Tool: "get_order", Args: []byte(`{}`)}}}},
		{"proposes early", transcript{Ticket: Ticket{ID: "T-1", OrderID: "LK-1", Body: "x"}, Turns: []turn{{Proposal: &proposal{}}, {Proposal: &proposal{}}}}},
		{"unknown tool", transcript{Ticket: Ticket{ID: "T-1", OrderID: "LK-1", Body: "x"}, Turns: []turn{{Tool: "refund", Args: []byte(`{}`)}, {Proposal: &proposal{}}}}},
		{"action without args", transcript{Ticket: Ticket{ID: "T-1", OrderID: "LK-1", Body: "x"}, Turns: []turn{{Proposal: &proposal{Actions: []record.Action{{Name: "x"}}}}}}},
	}
	for _, b := range bad {
		if err := b.tr.validate("T-1"); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
	}
}

// encodeState and decodeState are a state as a checkpoint holds it and as a
// new process reads it back: the engine encodes a state deterministically
// and decodes it strictly, refusing what it does not know.
func encodeState(st *record.State) ([]byte, error) {
	return jsonv2.Marshal(st, jsonv2.Deterministic(true))
}

func decodeState(b []byte) (*record.State, error) {
	var st record.State
	if err := jsonv2.Unmarshal(b, &st, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, err
	}
	return &st, nil
}
