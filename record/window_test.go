package record

import (
	"testing"
	"time"
)

// TestWindowNext: when a window is open and when it next opens, on the
// wall clock of its location, across a weekend, overnight and a daylight
// saving change.
func TestWindowNext(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	weekdays, _ := ParseDays("mon-fri")
	office := &Window{Days: weekdays, From: "09:00", To: "17:00", TZ: "America/New_York"}
	nights := &Window{Days: weekdays, From: "22:00", To: "06:00", TZ: "America/New_York"}
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, ny) }
	tests := []struct {
		name string
		w    *Window
		t    time.Time
		open bool
		next time.Time
	}{
		{"inside", office, at(2026, 12, 1, 10, 0), true, at(2026, 12, 1, 10, 0)},
		{"at from", office, at(2026, 12, 1, 9, 0), true, at(2026, 12, 1, 9, 0)},
		{"at to is closed", office, at(2026, 12, 1, 17, 0), false, at(2026, 12, 2, 9, 0)},
		{"before from", office, at(2026, 12, 1, 8, 59), false, at(2026, 12, 1, 9, 0)},
		{"friday evening waits for monday", office, at(2026, 12, 4, 18, 0), false, at(2026, 12, 7, 9, 0)},
		{"saturday", office, at(2026, 12, 5, 12, 0), false, at(2026, 12, 7, 9, 0)},
		{"overnight evening", nights, at(2026, 12, 1, 23, 0), true, at(2026, 12, 1, 23, 0)},
		{"overnight morning after a listed day", nights, at(2026, 12, 5, 5, 0), true, at(2026, 12, 5, 5, 0)},
		{"overnight morning after sunday", nights, at(2026, 12, 7, 5, 0), false, at(2026, 12, 7, 22, 0)},
		{"overnight afternoon", nights, at(2026, 12, 1, 12, 0), false, at(2026, 12, 1, 22, 0)},
		// 2027-03-14 the clocks go forward: Monday's 09:00 is EDT, 13:00 UTC, not 14:00.
		{"across spring forward", office, at(2027, 3, 12, 18, 0), false, time.Date(2027, 3, 15, 13, 0, 0, 0, time.UTC)},
		// 2026-11-01 the clocks went back: Monday's 09:00 is EST, 14:00 UTC.
		{"across fall back", office, at(2026, 10, 30, 18, 0), false, time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Open(tt.t); got != tt.open {
				t.Errorf("Open(%s) = %v, want %v", tt.t, got, tt.open)
			}
			if got := tt.w.Next(tt.t); !got.Equal(tt.next) {
				t.Errorf("Next(%s) = %s, want %s", tt.t, got, tt.next)
			}
		})
	}
}

// TestParseDays: names, ranges (wrapping over the weekend) and lists.
func TestParseDays(t *testing.T) {
	for in, want := range map[string]string{"mon-fri": "mon,tue,wed,thu,fri", "sat,sun": "sun,sat", "mon,wed-fri": "mon,wed,thu,fri", "fri-mon": "sun,mon,fri,sat", " Tue ": "tue"} {
		days, err := ParseDays(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		w := &Window{Days: days, From: "09:00", To: "10:00", TZ: "UTC"}
		if got := w.String(); got != want+" 09:00-10:00 UTC" {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "monday", "mon-", "mon,,tue"} {
		if _, err := ParseDays(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
