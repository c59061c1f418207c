package benchkit

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		line string
		comm string
		ppid int
		bad  bool
	}{
		{line: "14575 (postgres) S 1 14575 14575 0 -1 4194304 4981 43496 1 1 1 3 260", comm: "postgres", ppid: 1},
		// A name may hold spaces and parentheses: the fields after it count
		// from its last ')'.
		{line: "77 (a) b (c)) R 42 77 77 0", comm: "a) b (c)", ppid: 42},
		{line: "77 (postgres", bad: true},
		{line: "77 postgres) S 1", bad: true},
		{line: "77 (postgres) S", bad: true},
		{line: "77 (postgres) S x", bad: true},
		{line: "77 (postgres) S -3", bad: true},
		{line: "", bad: true},
	} {
		comm, ppid, err := parseProcStat([]byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: read (%q, %d), want an error", tc.line, comm, ppid)
			}
			continue
		}
		if err != nil || comm != tc.comm || ppid != tc.ppid {
			t.Errorf("%q: (%q, %d, %v), want (%q, %d)", tc.line, comm, ppid, err, tc.comm, tc.ppid)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	for line, want := range map[string]time.Duration{
		"49819221 21048186 113\n": 49819221 * time.Nanosecond,
		"0 0 0":                   0,
		"":                        -1,
		"x 1 2":                   -1,
		"-5 1 2":                  -1,
	} {
		got, err := parseSchedstat([]byte(line))
		if want < 0 {
			if err == nil {
				t.Errorf("%q: read %v, want an error", line, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", line, got, err, want)
		}
	}
}

// TestProcTimesSince: what each process used between two readings, a
// process that ended left out and one that began counted whole, never
// less than nothing.
func TestProcTimesSince(t *testing.T) {
	then := ProcTimes{1: 10 * time.Millisecond, 2: 50 * time.Millisecond, 3: 40 * time.Millisecond, 4: 30 * time.Millisecond}
	// 2 ended; 4's pid was taken by a new process that has used 5 ms;
	// 5 began.
	now := ProcTimes{1: 12 * time.Millisecond, 3: 41 * time.Millisecond, 4: 5 * time.Millisecond, 5: 7 * time.Millisecond}
	if got, want := now.Since(then), (2+1+5+7)*time.Millisecond; got != want {
		t.Errorf("since: %v, want %v", got, want)
	}
	if got := then.Since(then); got != 0 {
		t.Errorf("since itself: %v, want 0", got)
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("14575 (postgres) S 1 14575 14575 0"))
	f.Add([]byte("77 (a) b (c)) R 42 77"))
	f.Fuzz(func(t *testing.T, b []byte) {
		comm, ppid, err := parseProcStat(b)
		if err == nil && ppid < 0 {
			t.Errorf("%q: ppid %d", b, ppid)
		}
		if err != nil && (comm != "" || ppid != 0) {
			t.Errorf("%q: an error with (%q, %d)", b, comm, ppid)
		}
	})
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add([]byte("49819221 21048186 113"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := parseSchedstat(b); err == nil && d < 0 {
			t.Errorf("%q: %v", b, d)
		}
	})
}

// TestTheServersCPUIsMeasuredOnThisMachine: a PostgreSQL server on this
// machine is found by a connection's backend, and its CPU time grows with
// the runs it serves; this process, which is not a server, is not taken for
// one.
func TestTheServersCPUIsMeasuredOnThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a server's processes are read from Linux's /proc only")
	}
	if _, ok := ServerCPU(os.Getpid()); ok {
		t.Error("this test's own process was taken for a PostgreSQL server")
	}
	tg, eng := postgresEngine(t)
	if tg.ServerCPU == nil {
		t.Skip("the server SIGNOFF_TEST_POSTGRES names does not run on this machine")
	}
	before, err := tg.ServerCPU()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := EndToEnd(t.Context(), eng); err != nil {
			t.Fatal(err)
		}
	}
	after, err := tg.ServerCPU()
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Since(before); d <= 0 {
		t.Errorf("the server's processes used %v of CPU over 20 whole runs", d)
	}
}
