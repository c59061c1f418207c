package execute

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// The wait a target asks for is found through wrapping, bounded by
// MaxRetryAfter, never negative, and the error stays transient.
func TestRetryAfterIsBoundedAndTransient(t *testing.T) {
	base := errors.New("429 too many requests")
	for _, tt := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"asked", RetryAfter(base, 30*time.Second), 30 * time.Second},
		{"wrapped", fmt.Errorf("call: %w", RetryAfter(base, time.Second)), time.Second},
		{"too long", RetryAfter(base, time.Hour), MaxRetryAfter},
		{"negative", RetryAfter(base, -time.Second), 0},
		{"not asked", Transient(base), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfterOf(tt.err); got != tt.want {
				t.Errorf("retryAfterOf = %s, want %s", got, tt.want)
			}
			if c := Classify(tt.err); c != ClassTransient {
				t.Errorf("Classify = %s, want transient", c)
			}
			if !errors.Is(tt.err, base) {
				t.Error("the target's error is no longer in the chain")
			}
		})
	}
}

// A run is parked while it executes with no lease holder until a time to
// come; a lease held, a time past or another status is no parking.
func TestParkedUntil(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := now.Add(time.Minute)
	for _, tt := range []struct {
		name string
		run  record.Run
		want time.Time
	}{
		{"parked", record.Run{Status: record.StatusExecuting, LeaseUntil: later}, later},
		{"due", record.Run{Status: record.StatusExecuting, LeaseUntil: now}, time.Time{}},
		{"leased", record.Run{Status: record.StatusExecuting, LeaseOwner: "w1", LeaseUntil: later}, time.Time{}},
		{"waiting", record.Run{Status: record.StatusWaitingApproval, LeaseUntil: later}, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParkedUntil(&tt.run, now); !got.Equal(tt.want) {
				t.Errorf("ParkedUntil = %s, want %s", got, tt.want)
			}
		})
	}
}
