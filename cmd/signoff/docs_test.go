package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
