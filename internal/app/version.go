package app

import (
	"runtime/debug"
	"strings"
)

// revision is the VCS revision a build without VCS information was made from,
// as cmd/signoff was stamped with it (-ldflags "-X main.revision=REV": the
// image's build context has no .git, so the Dockerfile passes it in); Main
// sets it.
var revision string

// version says which build this is: the module version, and the VCS revision
// it was built from when the build recorded one or was stamped with it.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		v := "signoff (unknown version: built without module support)"
		if revision != "" {
			v += " (revision " + revision + ")"
		}
		return v
	}
	return versionOf(bi, revision)
}

// versionOf prefers what the build recorded of the VCS (it knows the time and
// uncommitted changes) to a stamped revision.
func versionOf(bi *debug.BuildInfo, stamped string) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if stamped == "" {
			return "signoff " + v + " (no VCS information in this build)"
		}
		return "signoff " + v + " (revision " + stamped + ")"
	}
	details := []string{"revision " + rev}
	if at != "" {
		details = append(details, at)
	}
	if modified {
		details = append(details, "with uncommitted changes")
	}
	return "signoff " + v + " (" + strings.Join(details, ", ") + ")"
}
