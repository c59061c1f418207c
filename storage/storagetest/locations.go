package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// testMessageLocations: where a request's message was posted is written
// once, read back per run with milliseconds in UTC, and never touches the
// request row, so that recording a post cannot race a decision.
func testMessageLocations(t *testing.T, s storage.Store) {
	seedRun(t, s, "run-1")
	seedRun(t, s, "run-2")
	first := seedRequest(t, s, "run-1", "req-1")
	seedRequest(t, s, "run-1", "req-2")
	seedRequest(t, s, "run-2", "req-3")

	locs := []*record.MessageLocation{
		{RequestID: "req-2", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000200", PostedAt: odd.Add(time.Minute)},
		{RequestID: "req-1", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000100", PostedAt: odd},
		{RequestID: "req-3", RunID: "run-2", Channel: "C0OTHER", TS: "1732872000.000300", PostedAt: odd},
	}
	for _, l := range locs {
		update(t, s, func(ctx context.Context, tx storage.Tx) error { return tx.InsertMessageLocation(ctx, l) })
	}

	got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.MessageLocation, error) {
		return tx.MessageLocations(ctx, "run-1")
	})
	want := []record.MessageLocation{
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
	if none := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.MessageLocation, error) {
		return tx.MessageLocations(ctx, "run-unknown")
	}); len(none) != 0 {
		t.Errorf("a run without messages lists %+v", none)
	}

	// The request row is as it was: the location wrote nothing there.
	req := load(t, s, func(ctx context.Context, tx storage.Tx) (*record.ApprovalRequest, error) {
		return tx.Request(ctx, "req-1")
	})
	if req.Version != first.Version {
		t.Errorf("request version %d after its message was recorded, want %d", req.Version, first.Version)
	}

	for _, tc := range []struct {
		name string
		loc  *record.MessageLocation
		want error
	}{
		{"a second message of one request", &record.MessageLocation{RequestID: "req-1", RunID: "run-1", Channel: "C0ELSEWHERE", TS: "1732872999.000100", PostedAt: base}, storage.ErrDuplicate},
		{"an unknown request", &record.MessageLocation{RequestID: "req-missing", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872999.000200", PostedAt: base}, storage.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
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
			got := load(t, s, func(ctx context.Context, tx storage.Tx) ([]*record.MessageLocation, error) {
				return tx.MessageLocations(ctx, "run-1")
			})
			if len(got) != 2 || got[0].TS != "1732872000.000100" || got[0].Channel != "C0APPROVALS" {
				t.Errorf("after the refusal run-1's locations are %+v", got)
			}
		})
	}
}

// BeforeMessageLocations is what a store at migration 8 holds for
// CheckMessageLocationsMoved: a sealed request posted when its channel and ts
// were columns of the request, and a request never posted. Both drivers run
// these statements as they are.
var BeforeMessageLocations = []string{
	`INSERT INTO runs (id, workflow, status, step, seq, version, created_at, updated_at) VALUES ('run-1', 'proposal', 'waiting_approval', 0, 0, 1, 1000, 1000)`,
	`INSERT INTO approval_requests (id, run_id, status, channel, message_ts, version, created_at, key_id, mac)
		VALUES ('req-posted', 'run-1', 'superseded', 'C0APPROVALS', '1732872000.000100', 2, 1732872000123, 'k1', 'mac-1')`,
	`INSERT INTO approval_requests (id, run_id, status, version, created_at) VALUES ('req-unposted', 'run-1', 'pending', 1, 1732872000456)`,
}

// CheckMessageLocationsMoved checks s, migrated from BeforeMessageLocations:
// the posted request's location is a record of its own (posted at the
// request's creation, the best time known), and the request kept its
// version and seal, which never covered where it was posted.
func CheckMessageLocationsMoved(t *testing.T, s storage.Store) {
	t.Helper()
	var locs []*record.MessageLocation
	var req *record.ApprovalRequest
	if err := s.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		var err error
		if locs, err = tx.MessageLocations(ctx, "run-1"); err != nil {
			return err
		}
		req, err = tx.Request(ctx, "req-posted")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := record.MessageLocation{RequestID: "req-posted", RunID: "run-1", Channel: "C0APPROVALS", TS: "1732872000.000100",
		PostedAt: time.UnixMilli(1732872000123).UTC()}
	if len(locs) != 1 || *locs[0] != want {
		t.Fatalf("locations after the migration: %+v, want only %+v", locs, want)
	}
	if req.Version != 2 || req.KeyID != "k1" || req.MAC != "mac-1" || req.Status != record.RequestSuperseded {
		t.Errorf("the request changed in the migration: %+v", req)
	}
}
