package command

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// Rule is a path a program may reach (Landlock's "beneath"): below it, read
// files and folders and run programs; with Write, also create, change and
// remove.
type Rule struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
}

// DefaultRead is what every program may read and run without a word in the
// config: the system's programs, libraries and configuration, and the
// devices that give bytes. Not /proc, /sys, /home, /tmp or /var.
var DefaultRead = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
	"/dev/zero", "/dev/random", "/dev/urandom",
}

// DefaultWrite is what every program may write without a word in the config.
var DefaultWrite = []string{"/dev/null"}

// User is who a program runs as (run_as).
type User struct {
	Name   string `json:"name"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Groups []int  `json:"groups"`
}

// LookupUser finds a user by name (or number) with its groups.
func LookupUser(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return nil, err
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("no user %q on this machine", name)
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q: ids %s:%s are not numbers", name, u.Uid, u.Gid)
	}
	out := &User{Name: u.Username, UID: uid, GID: gid}
	ids, err := u.GroupIds()
	if err != nil {
		ids = []string{u.Gid}
	}
	for _, s := range ids {
		if g, err := strconv.Atoi(s); err == nil {
			out.Groups = append(out.Groups, g)
		}
	}
	return out, nil
}

// private is a file no program may reach, nor a file beside it whose name
// holds its name (the store's -wal, -shm and -journal, the keys written aside).
type private struct{ dir, name string }

// privates resolves the private paths: their folders, symlinks followed.
// A file that does not exist yet is private all the same.
func privates(paths []string) []private {
	var out []private
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		dir := filepath.Dir(abs)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		name := filepath.Base(abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			// The file a symlink names is private too.
			out = append(out, private{filepath.Dir(real), filepath.Base(real)})
		}
		out = append(out, private{dir, name})
	}
	return out
}

// is reports whether path (real) is p's file or one beside it.
func (p private) is(path string) bool {
	return filepath.Dir(path) == p.dir && strings.Contains(filepath.Base(path), p.name)
}

// under reports whether p lies below the folder dir (real).
func (p private) under(dir string) bool {
	return p.dir == dir || dir == "/" || strings.HasPrefix(p.dir, dir+"/")
}

// ruleSet gathers the rules of what a program may reach. A folder that
// holds a private file is granted entry by entry, without it (so a file made
// there later is out of reach, and the program cannot create files there).
// A listed path that is private is an error naming its field; one that does
// not exist is left out and said (missing), as is a default.
type ruleSet struct {
	priv  []private
	rules []Rule
	// missing says which listed paths do not exist (yet): left out.
	missing []string
}

func (s *ruleSet) isPrivate(real string) bool {
	for _, p := range s.priv {
		if p.is(real) {
			return true
		}
	}
	return false
}

// add grants path; listed paths must exist and must not be private.
func (s *ruleSet) add(field, path string, write, listed bool) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if listed && errors.Is(err, fs.ErrNotExist) {
			s.missing = append(s.missing, fmt.Sprintf("%s: %s does not exist: the program cannot reach it (make it, then restart)", field, path))
			return nil
		}
		if listed {
			return fmt.Errorf("%s: %v", field, err)
		}
		return nil
	}
	if s.isPrivate(real) {
		if listed {
			return fmt.Errorf("%s: %s is signoff's own (the store or the integrity keys): no program may reach it", field, path)
		}
		return nil
	}
	s.grant(real, write, 0)
	return nil
}

// grant adds real, or its entries when it holds a private file.
func (s *ruleSet) grant(real string, write bool, depth int) {
	holds := false
	for _, p := range s.priv {
		if p.under(real) {
			holds = true
			break
		}
	}
	info, err := os.Stat(real)
	if err != nil {
		return
	}
	if !holds || !info.IsDir() {
		s.rules = append(s.rules, Rule{Path: real, Write: write})
		return
	}
	if depth > 32 {
		return // a symlink loop: leave it out
	}
	ents, err := os.ReadDir(real)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(real, e.Name())
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if s.isPrivate(r) {
			continue
		}
		s.grant(r, write, depth+1)
	}
}

// pathRules are the rules of cfg, whose programs are resolved already, and
// what of it is missing.
func pathRules(cfg Config) ([]Rule, []string, error) {
	s := &ruleSet{priv: privates(cfg.Private)}
	for _, p := range DefaultRead {
		_ = s.add("", p, false, false)
	}
	for _, p := range DefaultWrite {
		_ = s.add("", p, true, false)
	}
	// The programs, and the files their arguments name (a script given to
	// an interpreter).
	for _, p := range []struct {
		field string
		argv  []string
	}{{"command", cfg.Command}, {"lookup", cfg.Lookup}, {"check", cfg.Check}} {
		for i, a := range p.argv {
			if i > 0 && !strings.Contains(a, "/") {
				continue
			}
			path := a
			if !filepath.IsAbs(path) {
				path = filepath.Join(cfg.Dir, path)
			}
			if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
				continue
			}
			if err := s.add(fmt.Sprintf("%s[%d]", p.field, i), path, false, true); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, l := range []struct {
		field string
		paths []string
		write bool
	}{{"paths.read", cfg.Read, false}, {"paths.write", cfg.Write, true}} {
		for i, p := range l.paths {
			field := fmt.Sprintf("%s[%d]", l.field, i)
			if strings.TrimSpace(p) == "" {
				return nil, nil, fmt.Errorf("%s: empty path", field)
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(cfg.Dir, p)
			}
			if err := s.add(field, p, l.write, true); err != nil {
				return nil, nil, err
			}
		}
	}
	return s.rules, s.missing, nil
}
