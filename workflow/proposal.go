package workflow

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
)

// MaxProposalBytes bounds a proposal's encoded size, wherever it comes from
// (a file, stdin, an HTTP body): a proposal is read whole before it is decoded.
const MaxProposalBytes = 1 << 20

// ErrProposalTooLarge is in the chain of the refusal of a proposal longer
// than MaxProposalBytes.
var ErrProposalTooLarge = errors.New("proposal larger than 1 MiB")

// ReadProposal reads one proposal from r and decodes it strictly: at most
// MaxProposalBytes, valid UTF-8, one JSON object with no unknown field, no
// duplicate key and nothing after it. Every edge (the CLI, the HTTP API)
// reads proposals here, so that they all refuse the same input the same way.
// A refusal is a *RefusedError with CodeInvalidInput.
func ReadProposal(r io.Reader) (*Proposal, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxProposalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read proposal: %w", err)
	}
	if len(b) > MaxProposalBytes {
		return nil, &record.RefusedError{Code: record.CodeInvalidInput, Err: ErrProposalTooLarge,
			Msg: fmt.Sprintf("invalid proposal: larger than %d bytes", MaxProposalBytes)}
	}
	if !utf8.Valid(b) {
		return nil, refused(record.CodeInvalidInput, "", "invalid proposal: not valid UTF-8 (at byte %d)", invalidUTF8At(b))
	}
	return ParseProposal(b)
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// FieldProblem is one thing wrong with one field of a proposal. Field is a
// path into the proposal: actions[0].args.amount, actions[1].name.
type FieldProblem struct {
	Field   string
	Message string
}

// actionError says which action of a proposal is wrong; it wraps the cause
// (an *ArgsError when the arguments fail their schema).
type actionError struct {
	index int // 0-based
	name  string
	field string // the action's field at fault: name or args
	err   error
}

func (e *actionError) Error() string {
	return fmt.Sprintf("action %d (%s): %v", e.index+1, e.name, e.err)
}

func (e *actionError) Unwrap() error { return e.err }

// ProposalProblems lists, one entry per field, what a refused proposal got
// wrong in its actions (the schema's verdict on each argument, an unknown
// action name); nil when err names no field.
func ProposalProblems(err error) []FieldProblem {
	var ae *actionError
	if !errors.As(err, &ae) {
		return nil
	}
	base := "actions[" + strconv.Itoa(ae.index) + "]." + ae.field
	var args *policy.ArgsError
	if !errors.As(ae.err, &args) {
		return []FieldProblem{{Field: base, Message: ae.err.Error()}}
	}
	out := make([]FieldProblem, 0, len(args.Problems))
	for _, p := range args.Problems {
		f := base
		if p.Path != "" {
			if p.Path[0] == '[' {
				f += p.Path
			} else {
				f += "." + p.Path
			}
		}
		out = append(out, FieldProblem{Field: f, Message: p.Reason})
	}
	return out
}

// unknownActionError keeps the message an unknown action always had
// ("action 2: unknown action …"), without the name twice.
type unknownActionError struct{ actionError }

func (e *unknownActionError) Error() string { return fmt.Sprintf("action %d: %v", e.index+1, e.err) }

func (e *unknownActionError) Unwrap() error { return &e.actionError }
