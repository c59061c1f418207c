package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/workflow"
)

// AgentWorkflow is the workflow name of runs of the recorded agent.
const AgentWorkflow = "recorded-agent"

// The read-only tools the recorded model may call.
const (
	ToolGetOrder    = "get_order"
	ToolGetPayments = "get_payments"
)

// ErrUnknownTicket is returned for a ticket without a recorded transcript.
var ErrUnknownTicket = errors.New("unknown ticket")

// Tickets lists the demo tickets the recorded agent can work on, sorted.
func Tickets() []string { return fixtures.TranscriptTickets() }

// Agent is the recorded agent: each step replays the next turn of a model
// transcript recorded for the run's ticket (st.TaskID), running the read-only
// tools it asks for against the shop. A replayed model answers the same way
// every time, so a run that resumes from a checkpoint proposes what an
// uninterrupted run would.
type Agent struct {
	shop *Shop
}

var _ workflow.Agent = (*Agent)(nil)

// NewAgent returns the recorded agent over shop. The shop serves the tools
// and keeps the model-call ledger.
func NewAgent(shop *Shop) *Agent { return &Agent{shop: shop} }

// Step asks the recorded model for turn st.ModelCalls and acts on it: a tool
// call is run and its result added to the messages and the evidence (done is
// false); the final turn sets st.Summary and st.Actions (done is true).
//
// A step changes st only when it succeeds, so a step that fails can be run
// again on the same state. It changes nothing in the shop but the model-call
// ledger, which is the provider's record of what the run cost: a repeated call
// shows there as an extra row.
func (a *Agent) Step(ctx context.Context, st *record.State) (bool, error) {
	tr, err := loadTranscript(st.TaskID)
	if err != nil {
		return false, fmt.Errorf("recorded agent, run %s: %w", st.RunID, err)
	}
	n := st.ModelCalls
	if n < 0 || n >= len(tr.Turns) {
		return false, &permanentError{fmt.Errorf("recorded agent, run %s: the transcript of %s has %d turns and the run has made %d model calls",
			st.RunID, st.TaskID, len(tr.Turns), n)}
	}
	t := tr.Turns[n]
	var msgs []record.Message
	if len(st.Messages) == 0 {
		msgs = append(msgs, record.Message{Role: "user", Content: tr.Ticket.prompt()})
	}
	if err := a.shop.recordModelCall(ctx, st.RunID, st.TaskID, n, t.TokensIn, t.TokensOut); err != nil {
		return false, fmt.Errorf("recorded agent, run %s: %w", st.RunID, err)
	}
	if t.Proposal != nil {
		actions := make([]record.Action, len(t.Proposal.Actions))
		for i, act := range t.Proposal.Actions {
			actions[i] = record.Action{Name: act.Name, Args: compact(act.Args)}
		}
		st.Messages = append(st.Messages, msgs...)
		st.Messages = append(st.Messages, record.Message{Role: "assistant", Content: t.Thought})
		st.Summary = t.Proposal.Summary
		st.Actions = actions
		st.ModelCalls = n + 1
		return true, nil
	}
	result, err := a.tool(ctx, t.Tool, t.Args)
	if err != nil {
		return false, fmt.Errorf("recorded agent, run %s, %s: %w", st.RunID, t.Tool, err)
	}
	args := compact(t.Args)
	msgs = append(msgs,
		record.Message{Role: "assistant", Content: t.Thought, Tool: t.Tool, Args: args},
		record.Message{Role: "tool", Tool: t.Tool, Result: result})
	st.Messages = append(st.Messages, msgs...)
	st.Evidence = append(st.Evidence, record.Evidence{Source: t.Tool, Data: result})
	st.ModelCalls = n + 1
	return false, nil
}

// tool runs one read-only tool. An order that does not exist is an answer the
// model gets to see, not a failure of the step.
func (a *Agent) tool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	var in struct {
		OrderID string `json:"order_id"`
	}
	if err := workflow.DecodeStrict(args, &in); err != nil {
		return nil, &permanentError{fmt.Errorf("arguments: %w", err)}
	}
	var out any
	var err error
	switch name {
	case ToolGetOrder:
		out, err = a.shop.Order(ctx, in.OrderID)
	case ToolGetPayments:
		var ps []Payment
		ps, err = a.shop.Payments(ctx, in.OrderID)
		out = struct {
			OrderID  string    `json:"order_id"`
			Payments []Payment `json:"payments"`
		}{in.OrderID, ps}
	default:
		return nil, &permanentError{fmt.Errorf("unknown tool %q", name)}
	}
	if errors.Is(err, storage.ErrNotFound) {
		out = map[string]string{"error": err.Error()}
	} else if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return b, nil
}

// transcript is one recorded conversation of the model with a ticket.
type transcript struct {
	Ticket     Ticket    `json:"ticket"`
	Model      string    `json:"model"`
	RecordedAt time.Time `json:"recorded_at"`
	Turns      []turn    `json:"turns"`
}

// turn is one model call: either a tool call or the final proposal.
type turn struct {
	Thought   string          `json:"thought"`
	Tool      string          `json:"tool,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Proposal  *proposal       `json:"proposal,omitempty"`
	TokensIn  int             `json:"tokens_in"`
	TokensOut int             `json:"tokens_out"`
}

type proposal struct {
	Summary string          `json:"summary"`
	Actions []record.Action `json:"actions"`
}

func (t Ticket) prompt() string {
	return fmt.Sprintf("Ticket %s from %s about order %s\nSubject: %s\n\n%s", t.ID, t.Customer, t.OrderID, t.Subject, t.Body)
}

// loadTranscript reads and checks the recording of ticket. A recording is
// decoded strictly: a field this build does not know means it was made for
// another build, and replaying it would be a guess.
func loadTranscript(ticket string) (*transcript, error) {
	b, err := fixtures.Transcript(ticket)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &permanentError{fmt.Errorf("%w %q (recorded: %s)", ErrUnknownTicket, ticket, strings.Join(Tickets(), ", "))}
	}
	if err != nil {
		return nil, err
	}
	var tr transcript
	if err := workflow.DecodeStrict(b, &tr); err != nil {
		return nil, &permanentError{fmt.Errorf("transcript %s: %w", ticket, err)}
	}
	if err := tr.validate(ticket); err != nil {
		return nil, &permanentError{fmt.Errorf("transcript %s: %w", ticket, err)}
	}
	return &tr, nil
}

func (tr *transcript) validate(ticket string) error {
	if tr.Ticket.ID != ticket {
		return fmt.Errorf("recorded for ticket %q", tr.Ticket.ID)
	}
	if tr.Ticket.OrderID == "" || tr.Ticket.Body == "" {
		return errors.New("the ticket has no order or no text")
	}
	if len(tr.Turns) == 0 {
		return errors.New("no turns")
	}
	for i, t := range tr.Turns {
		last := i == len(tr.Turns)-1
		switch {
		case t.Proposal != nil && t.Tool != "":
			return fmt.Errorf("turn %d is both a tool call and a proposal", i)
		case t.Proposal != nil && !last:
			return fmt.Errorf("turn %d proposes, but turns follow it", i)
		case t.Proposal == nil && last:
			return fmt.Errorf("the last turn (%d) does not propose", i)
		case t.Proposal == nil && t.Tool != ToolGetOrder && t.Tool != ToolGetPayments:
			return fmt.Errorf("turn %d calls unknown tool %q", i, t.Tool)
		case t.Proposal == nil && !isObject(t.Args):
			return fmt.Errorf("turn %d: tool arguments are not a JSON object", i)
		}
		if t.Proposal != nil {
			for j, a := range t.Proposal.Actions {
				if a.Name == "" || !isObject(a.Args) {
					return fmt.Errorf("turn %d, action %d: needs a name and an object of arguments", i, j)
				}
			}
		}
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// compact drops the recording's layout so the arguments are plain JSON.
func compact(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		// validate accepted it as JSON already; keep it as it was.
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}

// permanentError marks an agent failure that a retry cannot fix (an unknown
// ticket, a broken recording).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent reports that retrying will not help.
func (e *permanentError) Permanent() bool { return true }
