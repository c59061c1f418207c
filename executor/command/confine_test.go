package command_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/signoff-dev/signoff/executor/command"
)

// probe is a program that tries to reach each path given as NAME=PATH
// (reading, or writing for w:NAME) and writes what it could to $OUT.
const probe = `for arg in "$@"; do
  name=${arg%%=*}; path=${arg#*=}
  case $name in
    w:*) if (echo x > "$path") 2>/dev/null; then echo "$name ok"; else echo "$name refused"; fi ;;
    *) if cat "$path" >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi ;;
  esac
done > "$OUT"
echo '{"id":"probed"}'`

// TestAProgramReachesOnlyItsPaths: a config folder listed as readable opens
// up everything in it but the store and the keys (and a symlink to the keys);
// /proc (signoff's environment with it), other folders and unlisted writes
// are refused. Listing /proc opens it (what then guards signoff's own
// entries is that it is not dumpable: TestAProgramCannotReadSignoffsSecrets
// in cmd/signoff).
func TestAProgramReachesOnlyItsPaths(t *testing.T) {
	if abi := command.LandlockABI(); abi == 0 {
		t.Skip("this kernel has no Landlock: programs run unconfined here (config check warns); the non-dumpable part is TestAProgramCannotReadSignoffsSecrets in cmd/signoff")
	}
	dir, elsewhere, out := t.TempDir(), t.TempDir(), t.TempDir()
	for _, f := range []string{"signoff.yaml", "signoff.db", "signoff.db-wal", "signoff.keys", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret-ish\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(dir, "signoff.keys"), filepath.Join(dir, "keys-link"))
	os.WriteFile(filepath.Join(elsewhere, "other"), []byte("x"), 0o600)
	prog := script(t, out, "probe", probe)
	argv := []string{filepath.Join(out, prog),
		"config=" + filepath.Join(dir, "signoff.yaml"), "notes=" + filepath.Join(dir, "notes.txt"),
		"store=" + filepath.Join(dir, "signoff.db"), "wal=" + filepath.Join(dir, "signoff.db-wal"),
		"keys=" + filepath.Join(dir, "signoff.keys"), "keys-link=" + filepath.Join(dir, "keys-link"),
		"elsewhere=" + filepath.Join(elsewhere, "other"),
		"signoff-environ=/proc/" + strconv.Itoa(os.Getpid()) + "/environ", "proc-self=/proc/self/status",
		"w:out=" + filepath.Join(out, "made"), "w:config-folder=" + filepath.Join(dir, "new"), "w:elsewhere=" + filepath.Join(elsewhere, "new"),
	}
	tests := []struct {
		name string
		read []string
		want string
	}{
		{"defaults and the config folder", []string{dir},
			"config ok|notes ok|store refused|wal refused|keys refused|keys-link refused|elsewhere refused|signoff-environ refused|proc-self refused|w:out ok|w:config-folder refused|w:elsewhere refused"},
		{"/proc listed too", []string{dir, "/proc"},
			"config ok|notes ok|store refused|wal refused|keys refused|keys-link refused|elsewhere refused|proc-self ok|w:out ok|w:config-folder refused|w:elsewhere refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := filepath.Join(out, "report")
			x, err := command.New("rotate_key", command.Config{
				Command: argv, Dir: dir, Env: []string{"OUT=" + report},
				Read: tt.read, Write: []string{out},
				Private: []string{filepath.Join(dir, "signoff.db"), filepath.Join(dir, "signoff.keys")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !x.Confined() {
				t.Fatal("Landlock is there but the executor does not use it")
			}
			if _, err := x.Execute(context.Background(), "run_1/1", rotate); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if name, _, _ := strings.Cut(l, " "); strings.Contains("|"+tt.want, "|"+name+" ") {
					lines = append(lines, l)
				}
			}
			if got := strings.Join(lines, "|"); got != tt.want {
				t.Fatalf("the program reached\n%s\nwant\n%s", strings.ReplaceAll(got, "|", "\n"), strings.ReplaceAll(tt.want, "|", "\n"))
			}
		})
	}
}

// TestNewRefusesPathsOutOfReach: signoff's store and keys cannot be listed,
// nor a path that does not exist; nothing is built.
func TestNewRefusesPathsOutOfReach(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "signoff.keys")
	os.WriteFile(keys, []byte("k"), 0o600)
	os.Symlink(keys, filepath.Join(dir, "link"))
	priv := []string{filepath.Join(dir, "signoff.db"), keys}
	tests := []struct {
		name        string
		read, write []string
		want        string
	}{
		{"the keys", []string{"signoff.keys"}, nil, "paths.read[0]: " + keys + " is signoff's own (the store or the integrity keys): no program may reach it"},
		{"a symlink to the keys", nil, []string{"/tmp", "link"}, "paths.write[1]: " + filepath.Join(dir, "link") + " is signoff's own"},
		{"empty", nil, []string{" "}, "paths.write[0]: empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := command.New("a", command.Config{Command: []string{"true"}, Dir: dir, Read: tt.read, Write: tt.write, Private: priv})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRunAsStartsTheProgramAsAnotherUser (root only: only root may start a
// program as another user).
func TestRunAsStartsTheProgramAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run_as needs signoff to run as root; this test runs as uid " + strconv.Itoa(os.Geteuid()))
	}
	u, err := command.LookupUser("nobody")
	if err != nil {
		t.Skip("no user nobody here:", err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	prog := script(t, dir, "whoami", `id -u > ids; id -g >> ids; echo '{"id":"R-1"}'`)
	x, err := command.New("rotate_key", command.Config{Command: []string{prog}, Dir: dir, Write: []string{dir}, RunAs: u})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Execute(context.Background(), "run_1/1", rotate); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ids"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{strconv.Itoa(u.UID), strconv.Itoa(u.GID)}; strings.Join(got, ":") != strings.Join(want, ":") {
		t.Fatalf("the program ran as uid:gid %v, want %v", got, want)
	}
}
