package workflow_test

import (
	"encoding/json"
	"testing"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

type digestInput struct {
	task, summary, callback string
	requester               record.Person
	actions                 []record.Action
	evidence                []record.Evidence
}

func (in digestInput) digests() (fast, whole string, fastErr, wholeErr error) {
	fast, fastErr = workflow.ProposalDigest(in.task, in.requester, in.summary, in.callback, in.actions, in.evidence)
	whole, wholeErr = workflow.ProposalDocDigest(in.task, in.requester, in.summary, in.callback, in.actions, in.evidence)
	return
}

// TestProposalDigestIsStable: an idempotency key binds the digest of a
// proposal stored perhaps years ago, so the digest of the same proposal
// never changes: it is the digest of the proposal marshalled whole, and
// this one is pinned.
func TestProposalDigestIsStable(t *testing.T) {
	tests := []struct {
		name string
		in   digestInput
		want string
	}{
		{"refund with evidence", digestInput{task: "T-1", summary: "refund a duplicate charge <dup> & more",
			requester: record.Person{ID: "agent:a", Name: "Agent"},
			actions:   []record.Action{{Name: "request_refund", Args: json.RawMessage(`{"amount":119,"payment_id":"PAY-1"}`)}},
			evidence:  []record.Evidence{{Source: "get_payments", Data: json.RawMessage(`{"payments":[{"amount":119,"id":"PAY-1"}]}`)}, {Source: "note", Data: json.RawMessage(`"\u00e9\u2028"`)}}},
			"e8adf373fcb825d3a9f2de6678d463f0353c4e44f7209e331e1bc19b637581bd"},
		{"with a callback, no evidence", digestInput{task: "T-2", callback: "https://hooks.example.com/x?a=1&b=2",
			requester: record.Person{ID: "agent:b"},
			actions:   []record.Action{{Name: "reship_item", Args: json.RawMessage(`{"sku":"PLANTER"}`)}}},
			"e5aba025f4c0a386ccccbc786ffed1af1f144890d3b4c582c50e8cec254e4419"},
		{"nothing", digestInput{}, "a691947c2f6c8502022af79d730f3d5652b1500bc86cee7bc722c8e4c508ee54"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast, whole, fastErr, wholeErr := tt.in.digests()
			if fastErr != nil || wholeErr != nil {
				t.Fatalf("errors: %v, %v", fastErr, wholeErr)
			}
			if fast != whole {
				t.Errorf("digest %s, the proposal marshalled whole gives %s", fast, whole)
			}
			if fast != tt.want {
				t.Errorf("digest %s, pinned %s", fast, tt.want)
			}
		})
	}
}

// FuzzProposalDigest: for any proposal, the digest made from parts is the
// digest of the proposal marshalled whole, or the same error.
func FuzzProposalDigest(f *testing.F) {
	f.Add("T-1", "agent:a", "Agent", "refund", "", "request_refund", []byte(`{"amount":119}`), "get_payments", []byte(`{"b":1,"a":[1e2,0.10]}`))
	f.Add("", "", "", "", "https://x.example/\u2028", "", []byte(`{}`), "", []byte(``))
	f.Add("\xff", "a", "\u00e9", "<&>", "", "a", []byte(`[1]`), "s", []byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, task, reqID, reqName, summary, callback, action string, args []byte, source string, data []byte) {
		in := digestInput{task: task, summary: summary, callback: callback, requester: record.Person{ID: reqID, Name: reqName},
			actions:  []record.Action{{Name: action, Args: json.RawMessage(args)}},
			evidence: []record.Evidence{{Source: source, Data: json.RawMessage(data)}, {Source: "second", Data: json.RawMessage(`{"z":[true,null]}`)}}}
		fast, whole, fastErr, wholeErr := in.digests()
		if fast != whole || (fastErr == nil) != (wholeErr == nil) || (fastErr != nil && fastErr.Error() != wholeErr.Error()) {
			t.Fatalf("from parts %q, %v; whole %q, %v", fast, fastErr, whole, wholeErr)
		}
	})
}
