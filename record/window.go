package record

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is when a rule's approved actions may run: on Days, from From to
// To (local "HH:MM" in TZ). When From is later than To the window is
// overnight: it opens on a listed day at From and closes at To the day
// after. It is carried in the gate, so a run keeps the window it was
// approved under when the config changes.
type Window struct {
	// Days are the weekdays a window opens on (0 Sunday to 6 Saturday),
	// ascending, each once.
	Days []time.Weekday `json:"days"`
	From string         `json:"from"`
	To   string         `json:"to"`
	TZ   string         `json:"tz"`
}

// weekdays are the names days: accepts, in time.Weekday order.
var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseDays reads a days: value: names (sun to sat) and ranges of them
// (mon-fri, fri-mon wraps over the weekend), separated by commas.
func ParseDays(s string) ([]time.Weekday, error) {
	var set [7]bool
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(strings.ToLower(part))
		from, to, isRange := strings.Cut(part, "-")
		a, err := weekday(strings.TrimSpace(from))
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = weekday(strings.TrimSpace(to)); err != nil {
				return nil, err
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			set[d] = true
			if d == b {
				break
			}
		}
	}
	var out []time.Weekday
	for d, on := range set {
		if on {
			out = append(out, time.Weekday(d))
		}
	}
	return out, nil
}

func weekday(s string) (time.Weekday, error) {
	for i, n := range weekdays {
		if s == n {
			return time.Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a day: write sun, mon, tue, wed, thu, fri or sat, ranges like mon-fri, separated by commas", s)
}

// ParseClock reads a from: or to: value, "HH:MM" on a 24-hour clock, as
// minutes since midnight.
func ParseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh > 23 || mm > 59 || hh < 0 || mm < 0 {
		return 0, fmt.Errorf("%q is not a time of day: write it like 09:00 or 17:30", s)
	}
	return hh*60 + mm, nil
}

// Check says what is wrong with w, or nil: days, times and the location
// must all be known, and From and To differ.
func (w *Window) Check() error {
	if len(w.Days) == 0 {
		return fmt.Errorf("the window opens on no day")
	}
	from, err := ParseClock(w.From)
	if err != nil {
		return err
	}
	to, err := ParseClock(w.To)
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("from and to are both %s: the window would be empty (or always open; leave window: out for that)", w.From)
	}
	if _, err := time.LoadLocation(w.TZ); err != nil {
		return fmt.Errorf("unknown time zone %q: write an IANA name like America/New_York or UTC", w.TZ)
	}
	return nil
}

// String is the window as the config writes it, e.g. "mon,tue 09:00-17:00 America/New_York".
func (w *Window) String() string {
	names := make([]string, len(w.Days))
	for i, d := range w.Days {
		names[i] = weekdays[d]
	}
	return fmt.Sprintf("%s %s-%s %s", strings.Join(names, ","), w.From, w.To, w.TZ)
}

// bounds are w's minutes since midnight and location; a window that does
// not Check has none (ok false).
func (w *Window) bounds() (from, to int, loc *time.Location, ok bool) {
	if w.Check() != nil {
		return 0, 0, nil, false
	}
	from, _ = ParseClock(w.From)
	to, _ = ParseClock(w.To)
	loc, _ = time.LoadLocation(w.TZ)
	return from, to, loc, true
}

func (w *Window) on(d time.Weekday) bool {
	for _, x := range w.Days {
		if x == d {
			return true
		}
	}
	return false
}

// Open reports whether the window is open at t. The times of day are read
// on the wall clock of the window's location, so a daylight saving change
// moves nothing a person reads. A window that does not Check is never
// open: a damaged gate runs nothing.
func (w *Window) Open(t time.Time) bool {
	from, to, loc, ok := w.bounds()
	if !ok {
		return false
	}
	lt := t.In(loc)
	m := lt.Hour()*60 + lt.Minute()
	if from < to {
		return w.on(lt.Weekday()) && m >= from && m < to
	}
	// Overnight: the evening of a listed day, or the morning after one.
	return w.on(lt.Weekday()) && m >= from || w.on(lt.AddDate(0, 0, -1).Weekday()) && m < to
}

// Next is t when the window is open at t, else when it next opens: the
// From of the next listed day, in the window's location (so across a
// daylight saving change it opens at the same wall-clock time). Zero for a
// window that does not Check.
func (w *Window) Next(t time.Time) time.Time {
	from, _, loc, ok := w.bounds()
	if !ok {
		return time.Time{}
	}
	if w.Open(t) {
		return t
	}
	lt := t.In(loc)
	for d := 0; d <= 8; d++ {
		day := lt.AddDate(0, 0, d)
		if !w.on(day.Weekday()) {
			continue
		}
		// A From inside a spring-forward gap is normalised by time.Date to
		// the first minute after it, which is inside the window.
		start := time.Date(day.Year(), day.Month(), day.Day(), from/60, from%60, 0, 0, loc)
		if start.After(t) {
			return start
		}
	}
	return time.Time{}
}
