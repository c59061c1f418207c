package app

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root, seen from this package's folder, where
// the tests run.
const repoRoot = "../.."

// mdHeading is one heading of a Markdown file: its level (the number of #s),
// its text, where its line starts, and where its section's text starts and
// ends in the file.
type mdHeading struct {
	level      int
	text       string
	line       int
	start, end int
}

var headingLine = regexp.MustCompile(`^(#{1,6}) +(.+?)$`)

// mdHeadings lists the headings of a Markdown text outside its fenced code
// blocks (where a line starting with # is a shell comment), each section
// running to the next heading of the same or a higher level.
func mdHeadings(text string) []mdHeading {
	var hs []mdHeading
	fenced := false
	at := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		lineStart := at
		at += len(line)
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if m := headingLine.FindStringSubmatch(trimmed); m != nil && !fenced {
			hs = append(hs, mdHeading{level: len(m[1]), text: m[2], line: lineStart, start: at})
		}
	}
	for i := range hs {
		hs[i].end = len(text)
		for _, next := range hs[i+1:] {
			if next.level <= hs[i].level {
				hs[i].end = next.line
				break
			}
		}
	}
	return hs
}

// docSection is the text of the section of file (a path from the
// repository's root) under heading (its text, without the #s), up to the next
// heading of the same or a higher level; a missing file or heading fails the
// test. A test calling it with literal arguments claims the commands of that
// section: TestEveryDocsCommandIsRunByATest looks for such calls.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	text := string(b)
	for _, h := range mdHeadings(text) {
		if h.text == heading {
			return text[h.start:h.end]
		}
	}
	t.Fatalf("%s has no heading %q", file, heading)
	return ""
}

// codeBlock is one fenced code block: its language and its text.
type codeBlock struct {
	lang, body string
}

var fencedBlock = regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```")

// codeBlocks are the fenced code blocks of a text, in order.
func codeBlocks(text string) []codeBlock {
	var bs []codeBlock
	for _, m := range fencedBlock.FindAllStringSubmatch(text, -1) {
		bs = append(bs, codeBlock{lang: m[1], body: m[2]})
	}
	return bs
}

// blocksOf are the bodies of the code blocks of text in language lang.
func blocksOf(text, lang string) []string {
	var out []string
	for _, b := range codeBlocks(text) {
		if b.lang == lang {
			out = append(out, b.body)
		}
	}
	return out
}

// shLine is one command of a sh block: the command (continued lines joined),
// its comment, and the exit code the comment starts with ("# exit N"; 0 where it
// names none).
type shLine struct {
	cmd, comment string
	exit         int
}

var exitComment = regexp.MustCompile(`^exit (\d+)\b`)

// shLines splits a sh block into its commands; blank lines and lines that
// are only a comment are left out.
func shLines(block string) []shLine {
	var out []shLine
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		cmd, comment, _ := strings.Cut(line, " #")
		cmd = strings.TrimSpace(cmd)
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		l := shLine{cmd: cmd, comment: strings.TrimSpace(comment)}
		if m := exitComment.FindStringSubmatch(l.comment); m != nil {
			l.exit, _ = strconv.Atoi(m[1])
		}
		out = append(out, l)
	}
	return out
}

// docRun runs the program as a reader types it: the words as written, no
// store flags added, in dir, with env added to the test's environment.
func docRun(t *testing.T, dir string, env []string, stdin string, words ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd, out, errb := child(t, dir, env)
	cmd.Args = append(cmd.Args[:1], words...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

// walk runs the signoff commands of a walkthrough in a folder of their own.
// A word that names a run (RUN, RUN2, …: each submit, run or fork names the
// next one that is free) or FP (the first fingerprint printed) is replaced
// by what it stands for; aliases name words that stand for signoff and its
// flags (alias so='… --config …').
type walk struct {
	dir     string
	env     []string
	vars    map[string]string
	runs    []string
	aliases map[string][]string
}

func newWalk(dir string, env []string, runs ...string) *walk {
	return &walk{dir: dir, env: env, vars: map[string]string{}, runs: runs, aliases: map[string][]string{"signoff": nil}}
}

var printedFingerprint = regexp.MustCompile(`fingerprint ([0-9a-f]{16})`)

// words are the words of a command, with what the walk knows replaced.
func (w *walk) words(t *testing.T, cmd string) []string {
	t.Helper()
	words := shellWords(t, cmd)
	for i, word := range words {
		if v, ok := w.vars[word]; ok {
			words[i] = v
		}
	}
	return words
}

// isSignoff reports whether a command runs signoff (itself, or an alias).
func (w *walk) isSignoff(t *testing.T, cmd string) bool {
	t.Helper()
	_, ok := w.aliases[shellWords(t, cmd)[0]]
	return ok
}

// signoff runs a signoff command of the walkthrough (or one of its aliases),
// checks its exit code and returns what it printed.
func (w *walk) signoff(t *testing.T, l shLine) (stdout, stderr string) {
	t.Helper()
	words := w.words(t, l.cmd)
	prefix, ok := w.aliases[words[0]]
	if !ok {
		t.Fatalf("a walkthrough line that is not signoff: %q", l.cmd)
	}
	args := append(append([]string{}, prefix...), words[1:]...)
	code, out, errs := docRun(t, w.dir, w.env, "", args...)
	if code != l.exit {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", l.cmd, code, l.exit, out, errs)
	}
	sub := subcommand(args)
	if (sub == "submit" || sub == "fork" || sub == "run") && len(w.runs) > 0 && code != exitRefused {
		w.vars[w.runs[0]], w.runs = runIDOf(t, out), w.runs[1:]
	}
	if m := printedFingerprint.FindStringSubmatch(out); m != nil && w.vars["FP"] == "" {
		w.vars["FP"] = m[1]
	}
	return out, errs
}

// subcommand is the command of a signoff command line: its first word that
// is neither a global flag nor a flag's value (every global flag takes one).
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case strings.HasPrefix(args[i], "--") && !strings.Contains(args[i], "="):
			i++
		case strings.HasPrefix(args[i], "-"):
		default:
			return args[i]
		}
	}
	return ""
}

// alias takes an `alias NAME='signoff-binary FLAGS…'` line: NAME then stands
// for signoff with those flags.
func (w *walk) alias(t *testing.T, cmd string) {
	t.Helper()
	def, ok := strings.CutPrefix(cmd, "alias ")
	name, value, ok2 := strings.Cut(def, "=")
	if !ok || !ok2 {
		t.Fatalf("not an alias: %q", cmd)
	}
	// The value is one quoted word; its first word is the binary the reader
	// built: this program.
	w.aliases[name] = strings.Fields(strings.Join(shellWords(t, value), " "))[1:]
}

// goSources are the repository's Go files (tests too, when tests is set),
// each path with its text.
func goSources(t *testing.T, tests bool) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || (!tests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w*)\(`)

// TestTheGoTestCommandsOfTheDocsSelectTests: the go test commands of the
// docs are not run by a test (they are the suite itself, its benchmarks, and
// the suite on PostgreSQL); each is checked against the code instead: its
// packages exist and have tests, its -run and -bench patterns select at
// least one test or benchmark there, and each variable it sets is one the
// code reads. (`go run ./cmd/signoff demo` is run by TestDemo.)
func TestTheGoTestCommandsOfTheDocsSelectTests(t *testing.T) {
	t.Parallel()
	sources := goSources(t, true)
	// Each package's folder, with the tests and benchmarks declared in it.
	funcs := map[string][]string{}
	for path, text := range sources {
		if strings.HasSuffix(path, "_test.go") {
			dir, _ := filepath.Rel(repoRoot, filepath.Dir(path))
			for _, m := range testFunc.FindAllStringSubmatch(text, -1) {
				funcs[filepath.ToSlash(dir)] = append(funcs[filepath.ToSlash(dir)], m[1])
			}
		}
	}
	reads := func(name string) bool {
		for path, text := range sources {
			if !strings.HasSuffix(path, "_test.go") && strings.Contains(text, `"`+name+`"`) {
				return true
			}
		}
		return false
	}
	valued := map[string]bool{"-run": true, "-bench": true, "-benchtime": true, "-count": true, "-cpuprofile": true, "-timeout": true}
	n := 0
	for name, sec := range map[string]string{
		"Two commands":            docSection(t, "README.md", "Two commands"),
		"Failpoints":              docSection(t, "docs/crash-testing.md", "Failpoints"),
		"The tests on PostgreSQL": docSection(t, "docs/crash-testing.md", "The tests on PostgreSQL"),
		"Your own actions":        docSection(t, "docs/performance.md", "Your own actions"),
		"The Go benchmarks":       docSection(t, "docs/performance.md", "The Go benchmarks"),
		"The MCP gateway":         docSection(t, "docs/performance.md", "The MCP gateway"),
	} {
		for _, block := range blocksOf(sec, "sh") {
			for _, l := range shLines(block) {
				words := shellWords(t, l.cmd)
				for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
					if v, _, _ := strings.Cut(words[0], "="); !reads(v) {
						t.Errorf("%s: %q sets %s, which no code reads", name, l.cmd, v)
					}
					words = words[1:]
				}
				if len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/signoff" {
					continue
				}
				if len(words) < 3 || words[0] != "go" || words[1] != "test" {
					t.Errorf("%s: %q is not a go test command", name, l.cmd)
					continue
				}
				n++
				flags := map[string]string{}
				var pkgs []string
				for i := 2; i < len(words); i++ {
					switch w := words[i]; {
					case valued[w] && i+1 < len(words):
						flags[w] = words[i+1]
						i++
					case strings.HasPrefix(w, "-"):
					default:
						pkgs = append(pkgs, w)
					}
				}
				var declared []string
				for _, p := range pkgs {
					dir, all := strings.CutSuffix(strings.TrimPrefix(p, "./"), "/...")
					if p == "./..." {
						dir, all = ".", true
					}
					found := false
					for d, fs := range funcs {
						if d == dir || all && (dir == "." || strings.HasPrefix(d, dir+"/")) {
							declared, found = append(declared, fs...), true
						}
					}
					if !found {
						t.Errorf("%s: %q names %s, which has no tests", name, l.cmd, p)
					}
				}
				for flag, prefix := range map[string]string{"-run": "Test", "-bench": "Benchmark"} {
					pattern, ok := flags[flag]
					if !ok || pattern == "^$" {
						continue
					}
					top, _, _ := strings.Cut(pattern, "/")
					re := regexp.MustCompile(top)
					if !slices.ContainsFunc(declared, func(f string) bool { return strings.HasPrefix(f, prefix) && re.MatchString(f) }) {
						t.Errorf("%s: %q: %s %s selects nothing in %v", name, l.cmd, flag, pattern, pkgs)
					}
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("checked %d go test commands; the docs show more", n)
	}
}

// TestTheFailpointsOfTheDocsAreTheCode: Failpoints names every write
// boundary at which the code can kill itself, and no other.
func TestTheFailpointsOfTheDocsAreTheCode(t *testing.T) {
	t.Parallel()
	sec := docSection(t, "docs/crash-testing.md", "Failpoints")
	listed, _, ok := strings.Cut(sec, "The tests in")
	if !ok {
		t.Fatal("Failpoints does not list them before what the tests do")
	}
	name := regexp.MustCompile("`((?:after|before|callback)-[a-zN-]+)`")
	var docs []string
	for _, m := range name.FindAllStringSubmatch(listed, -1) {
		docs = append(docs, m[1])
	}
	code := map[string]bool{}
	literal := regexp.MustCompile(`"((?:after|before|callback)-[a-z%-]+)"`)
	for _, text := range goSources(t, false) {
		for _, m := range literal.FindAllStringSubmatch(text, -1) {
			code[strings.ReplaceAll(m[1], "%d", "N")] = true
		}
	}
	got := slices.Sorted(maps.Keys(code))
	if want := slices.Sorted(slices.Values(docs)); !slices.Equal(got, want) {
		t.Errorf("the code has the failpoints %v, the docs list %v", got, want)
	}
}

// docFiles are the Markdown files whose commands must be run by a test: the
// README and every page of docs/, as paths from the repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// TestEveryDocsCommandIsRunByATest: each sh block of the README and of
// docs/ lies in a section (its file and nearest heading) that a test claims
// by reading it with docSection and literal arguments, and each section a
// test claims exists. A test that claims a section runs its commands, or,
// where they cannot run in a test (docker, go test itself), checks them
// against the code.
func TestEveryDocsCommandIsRunByATest(t *testing.T) {
	t.Parallel()
	claim := regexp.MustCompile(`docSection\(t, "([^"]+)", "([^"]+)"\)`)
	claimed := map[[2]string]string{}
	for path, text := range goSources(t, true) {
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range claim.FindAllStringSubmatch(text, -1) {
				claimed[[2]string{m[1], m[2]}] = path
			}
		}
	}
	sections := map[[2]string]bool{}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		hs := mdHeadings(text)
		for _, h := range hs {
			sections[[2]string{file, h.text}] = true
		}
		for _, m := range fencedBlock.FindAllStringSubmatchIndex(text, -1) {
			if text[m[2]:m[3]] != "sh" {
				continue
			}
			heading := ""
			for _, h := range hs {
				if h.line < m[0] {
					heading = h.text
				}
			}
			if _, ok := claimed[[2]string{file, heading}]; !ok {
				line := strings.Count(text[:m[0]], "\n") + 1
				t.Errorf("%s:%d (under %q): a sh block that no test runs or checks; the test that does claims it by calling docSection with %q and %q",
					file, line, heading, file, heading)
			}
		}
	}
	for c, path := range claimed {
		if !sections[c] {
			t.Errorf("%s claims %s, %q, which has no such heading", path, c[0], c[1])
		}
	}
}

// TestTheDocsLinksResolve: every link of the README and of docs/ to a file
// of the repository names one that exists, and every #anchor a heading of
// the page it points at (as GitHub makes them: lower case, punctuation
// dropped, spaces as hyphens).
func TestTheDocsLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := func(text string) map[string]bool {
		out := map[string]bool{}
		for _, h := range mdHeadings(text) {
			slug := strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
					return r
				default:
					return -1
				}
			}, strings.ToLower(h.text))
			for n := 0; ; n++ {
				s := slug
				if n > 0 {
					s = fmt.Sprintf("%s-%d", slug, n)
				}
				if !out[s] {
					out[s] = true
					break
				}
			}
		}
		return out
	}
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	n := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		// Links in code blocks are text, not links.
		text := fencedBlock.ReplaceAllString(string(b), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			page := filepath.Join(repoRoot, file)
			if path != "" {
				page = filepath.Join(repoRoot, filepath.Dir(file), path)
			}
			pb, err := os.ReadFile(page)
			if err != nil {
				t.Errorf("%s links to %s: %v", file, target, err)
				continue
			}
			if anchor != "" && (!strings.HasSuffix(page, ".md") || !anchors(string(pb))[anchor]) {
				t.Errorf("%s links to %s: no heading makes #%s", file, target, anchor)
			}
		}
	}
	if n < 20 {
		t.Fatalf("%d links checked; the docs have more", n)
	}
}
