package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// testMessageLocations: where a request's message was posted is written
// once, read back per run with milliseconds in UTC, and never touches the
// request row, so that recording a post cannot race a decision.
func testMessageLocations(t *testing.T, s workflow.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	first := seedRequest(t, s, "run-1", "req-1")
	seedRequest(t, s, "run-1", "req-2")
	seedRequest(t, s, "run-2", "req-3")

	locs := []*workflow.MessageLocation{
		{RequestID: "req-2", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000200", PostedAt: odd.Add(time.Minute)},
		{RequestID: "req-1", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000100", PostedAt: odd},
		{RequestID: "req-3", RunID: "run-2", Channel: "C0OTHER", TS: "1732872000.000300", PostedAt: odd},
	}
	for _, l := range locs {
		update(t, s, func(ctx context.Context, tx workflow.Tx) error { return tx.InsertMessageLocation(ctx, l) })
	}

	got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.MessageLocation, error) {
		return tx.MessageLocations(ctx, "run-1")
	})
	want := []workflow.MessageLocation{
		{RequestID: "req-1", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000100", PostedAt: odd.UTC().Truncate(time.Millisecond)},
		{RequestID: "req-2", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000200", PostedAt: odd.Add(time.Minute).UTC().Truncate(time.Millisecond)},
	}
	if len(got) != len(want) {
		t.Fatalf("run-1 has %d locations, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if *got[i] != want[i] {
			t.Errorf("location %d = %+v, want %+v", i, *got[i], want[i])
		}
	}
	if none := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.MessageLocation, error) {
		return tx.MessageLocations(ctx, "run-unknown")
	}); len(none) != 0 {
		t.Errorf("a run without messages lists %+v", none)
	}

	// The request row is as it was: the location wrote nothing there.
	req := load(t, s, func(ctx context.Context, tx workflow.Tx) (*workflow.ApprovalRequest, error) {
		return tx.Request(ctx, "req-1")
	})
	if req.Version != first.Version {
		t.Errorf("request version %d after its message was recorded, want %d", req.Version, first.Version)
	}

	for _, tc := range []struct {
		name string
		loc  *workflow.MessageLocation
		want error
	}{
		{"a second message of one request", &workflow.MessageLocation{RequestID: "req-1", RunID: "run-1", Channel: "C0ELSEWHERE", TS: "1732872999.000100", PostedAt: base}, workflow.ErrDuplicate},
		{"an unknown request", &workflow.MessageLocation{RequestID: "req-missing", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872999.000200", PostedAt: base}, workflow.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(t.Context(), func(ctx context.Context, tx workflow.Tx) error {
				err := tx.InsertMessageLocation(ctx, tc.loc)
				if !errors.Is(err, tc.want) {
					return fmt.Errorf("got %v, want %v", err, tc.want)
				}
				// The transaction goes on after the refusal.
				_, err = tx.MessageLocations(ctx, "run-1")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			got := load(t, s, func(ctx context.Context, tx workflow.Tx) ([]*workflow.MessageLocation, error) {
				return tx.MessageLocations(ctx, "run-1")
			})
			if len(got) != 2 || got[0].TS != "1732872000.000100" || got[0].Channel != "C0APPROVALS" {
				t.Errorf("after the refusal run-1's locations are %+v", got)
			}
		})
	}
}
