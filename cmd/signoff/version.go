package main

import (
	"runtime/debug"
	"strings"
)

// version says which build this is: the module version, and the VCS revision
// it was built from when the build recorded one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "signoff (unknown version: built without module support)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
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
		return "signoff " + v
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
