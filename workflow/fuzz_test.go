package workflow_test

import (
	"testing"

	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// FuzzParseProposal: any input is either a proposal or a refusal, never a panic.
func FuzzParseProposal(f *testing.F) {
	f.Add([]byte(`{"requester":{"id":"a"},"actions":[{"name":"request_refund","args":{"amount":1}}]}`))
	f.Add([]byte(`{"requester":{"id":"a"},"requester":{"id":"b"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := workflow.ParseProposal(b)
		if err != nil {
			if !record.IsRefused(err, record.CodeInvalidInput) {
				t.Fatalf("a bad proposal must be refused as invalid input, got %v", err)
			}
			return
		}
		if p == nil {
			t.Fatal("nil proposal without an error")
		}
	})
}

// FuzzCanonical: canonical JSON is a fixed point and refuses what it cannot order.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[1.0,2e3,"x"]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := jsonvalue.Canonical(b)
		if err != nil {
			return
		}
		c2, err := jsonvalue.Canonical(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("canonical form is not stable: %q → %q (%v)", c, c2, err)
		}
	})
}
