package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// ExecutorType is the executor type of an action the agent that asked
// carries out itself, such as a permission prompt's: signoff runs nothing,
// and the operation's receipt records the grant.
const ExecutorType = "caller"

// Granted is the executor of such an action.
type Granted struct{}

var _ workflow.Executor = Granted{}

// Check has nothing to check: the caller's tool is out of signoff's reach.
func (Granted) Check(context.Context, record.Action) error { return nil }

// Execute records the grant under key.
func (Granted) Execute(_ context.Context, key string, _ record.Action) (record.Receipt, error) {
	return grant(key), nil
}

// Lookup says the grant happened: recording it is all there is to do, so an
// unknown outcome is a grant.
func (Granted) Lookup(_ context.Context, key string) (record.Receipt, bool, error) {
	return grant(key), true, nil
}

func grant(key string) record.Receipt {
	return record.Receipt{ID: key, Detail: json.RawMessage(`{"granted":true,"carried_out_by":"the caller"}`)}
}
