package app

import (
	"runtime/debug"
	"testing"
)

// serve and bench raise the garbage collector's goal to serverGC, unless
// GOGC says otherwise, which is then left in force.
func TestServerGCGoal(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	set := &cli{getenv: func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	}}
	if got := set.tuneGC(); got != "150" {
		t.Errorf("with GOGC=150: tuneGC says %s", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=150: the goal moved to %d", got)
	}
	if got := (&cli{getenv: noEnv}).tuneGC(); got != "400" {
		t.Errorf("without GOGC: tuneGC says %s, want 400", got)
	}
	if got := debug.SetGCPercent(100); got != serverGC {
		t.Errorf("without GOGC: the goal is %d, want %d", got, serverGC)
	}
}
