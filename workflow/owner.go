package workflow

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// unknownPart stands in an owner name for what this system does not tell (a
// boot id without /proc): an owner that has one is never taken for gone.
const unknownPart = "-"

// ownerName is what a lease owner made by LocalOwner is made of.
type ownerName struct {
	host, boot, pidNS string
	pid               int
}

func (o ownerName) String() string { return fmt.Sprintf("%s/%s/%s/%d", o.host, o.boot, o.pidNS, o.pid) }

// known says whether o names a process precisely enough to tell it is gone.
func (o ownerName) known() bool {
	return o.host != "" && o.boot != unknownPart && o.pidNS != unknownPart && o.pid > 0
}

// local is this process's owner name, read once.
var local = sync.OnceValue(func() ownerName {
	host, _ := os.Hostname()
	boot := unknownPart
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && strings.TrimSpace(string(b)) != "" {
		boot = strings.TrimSpace(string(b))
	}
	// pid:[4026531836]: processes in two pid namespaces (two containers of
	// one host, sharing its host name) do not see each other's pids.
	ns := unknownPart
	if l, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		if s, ok := strings.CutPrefix(l, "pid:["); ok && strings.HasSuffix(s, "]") {
			ns = strings.TrimSuffix(s, "]")
		}
	}
	return ownerName{host: strings.ReplaceAll(host, "/", "_"), boot: boot, pidNS: ns, pid: os.Getpid()}
})

// LocalOwner is the lease owner name of this process when the config names
// none: host/boot id/pid namespace/pid, so that a worker on the same host can
// tell a lease of a process that is gone (see LocalOwnerGone).
func LocalOwner() string { return local().String() }

// parseOwner reads an owner name LocalOwner made (of any process).
func parseOwner(s string) (ownerName, bool) {
	parts := strings.Split(s, "/")
	n := len(parts)
	if n < 4 {
		return ownerName{}, false
	}
	pid, err := strconv.Atoi(parts[n-1])
	if err != nil || pid <= 0 {
		return ownerName{}, false
	}
	return ownerName{host: strings.Join(parts[:n-3], "/"), boot: parts[n-3], pidNS: parts[n-2], pid: pid}, true
}

// LocalOwnerGone says whether owner is a process of this host, this boot and
// this pid namespace that no longer exists, so that its lease may be taken
// over before it lapses. It errs towards waiting: a name it cannot read (set
// by SIGNOFF_OWNER, or made by an older version), another host or boot, a
// process that exists (its pid may have been reused, and that only means the
// lease is waited out) or one it cannot ask about are not gone.
func LocalOwnerGone(owner string) bool {
	o, ok := parseOwner(owner)
	me := local()
	if !ok || !me.known() || !o.known() || o.host != me.host || o.boot != me.boot || o.pidNS != me.pidNS || o.pid == me.pid {
		return false
	}
	return processGone(o.pid)
}
