package workflow_test

import (
	"context"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/workflow"
)

// namedStrings are the stored names the module spells only through their
// constants: a literal elsewhere is how a typo would silently stop a match
// (an outbox hook that never sees "decidd").
var namedStrings = []string{"Event", "Risk", "OutboxKind", "Via"}

// TestStoredNamesAreSpelledByTheirConstants type-checks every package of the
// module (but the standalone examples and storagetest, whose rows are
// fixtures) and fails on a string literal of a type of namedStrings outside
// a const declaration ("" is none of them, and may be written). It also
// holds record.Events and record.Risks to the constants declared.
func TestStoredNamesAreSpelledByTheirConstants(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const mod = "github.com/signoff-dev/signoff"
	out, err := exec.Command("go", "list", "-export", "-deps", "-f",
		"{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkgInfo struct{ export, dir, files string }
	pkgs := map[string]pkgInfo{}
	var ours []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q", line)
		}
		pkgs[f[0]] = pkgInfo{f[1], f[2], f[3]}
		if (f[0] == mod || strings.HasPrefix(f[0], mod+"/")) && !strings.HasPrefix(f[0], mod+"/examples") && f[0] != mod+"/storage/storagetest" {
			ours = append(ours, f[0])
		}
	}
	if !slices.Contains(ours, mod+"/bot") || !slices.Contains(ours, mod+"/workflow") {
		t.Fatalf("packages not listed: %v", ours)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(pkgs[path].export) })
	for _, path := range ours {
		p := pkgs[path]
		var files []*ast.File
		for _, name := range strings.Split(p.files, ",") {
			if name == "" {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
		pkg, err := (&types.Config{Importer: imp}).Check(path, fset, files, info)
		if err != nil {
			t.Fatalf("type-check %s: %v", path, err)
		}
		consts := constDecls(files)
		for expr, tv := range info.Types {
			lit, ok := expr.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || lit.Value == `""` || tv.Type == nil {
				continue
			}
			if name := storedName(tv.Type, mod+"/workflow"); name != "" && !consts(lit.Pos()) {
				t.Errorf("%s: the %s %s is a literal; use its constant", fset.Position(lit.Pos()), name, lit.Value)
			}
		}
		if path == mod+"/workflow" {
			checkListed(t, pkg, "Event", record.Events)
			checkListed(t, pkg, "Risk", record.Risks)
		}
	}
}

// storedName is the name of t when it is one of workflow's namedStrings.
func storedName(t types.Type, workflowPath string) string {
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != workflowPath || !slices.Contains(namedStrings, n.Obj().Name()) {
		return ""
	}
	return "workflow." + n.Obj().Name()
}

// constDecls reports whether a position is inside a const declaration of files.
func constDecls(files []*ast.File) func(token.Pos) bool {
	var spans [][2]token.Pos
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				spans = append(spans, [2]token.Pos{g.Pos(), g.End()})
			}
		}
	}
	return func(p token.Pos) bool {
		return slices.ContainsFunc(spans, func(s [2]token.Pos) bool { return s[0] <= p && p < s[1] })
	}
}

// checkListed fails unless list holds every constant of workflow's type name,
// once, and nothing else.
func checkListed[T ~string](t *testing.T, pkg *types.Package, name string, list []T) {
	t.Helper()
	typ := pkg.Scope().Lookup(name).Type()
	var declared []string
	for _, n := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(n).(*types.Const); ok && types.Identical(c.Type(), typ) {
			declared = append(declared, constant.StringVal(c.Val()))
		}
	}
	var listed []string
	for _, v := range list {
		listed = append(listed, string(v))
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if !slices.Equal(declared, listed) || len(slices.Compact(slices.Clone(listed))) != len(listed) {
		t.Errorf("workflow.%ss lists %v; the %s constants are %v", name, listed, name, declared)
	}
}

// TestEveryEventRecordedHasAConstant drives runs through every kind of change
// and holds each audit event to record.Events. (The harness's hook holds
// every transition of every test to them too.)
func TestEveryEventRecordedHasAConstant(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var ids []string
	approved, cancelled, expired := h.submit(refund("PAY-1", 119)), h.submit(refund("PAY-1", 80)), h.submit(refund("PAY-1", 90))
	ids = append(ids, approved.ID, cancelled.ID, expired.ID)
	if _, err := h.engine.Decide(ctx, workflow.DecideInput{RunID: approved.ID, Approver: record.Person{ID: "agent:resolver"}, Verdict: record.VerdictApprove, Via: "cli"}); err == nil {
		t.Fatal("the requester approved their own proposal")
	}
	if _, err := h.engine.Reassign(ctx, approved.ID, record.Person{ID: "U0LEAD0001"}, record.Person{ID: "U0LEAD0002"}); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	if run, err := h.approve(approved.ID, "U0LEAD0002"); err != nil || run.Status != record.StatusDone {
		t.Fatalf("approve: %v, %+v", err, run)
	}
	fork, err := h.engine.Fork(ctx, approved.ID, 1, record.Person{ID: "U0LEAD0001"})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	ids = append(ids, fork.ID)
	if _, err := h.engine.Cancel(ctx, cancelled.ID, record.Person{ID: "U0LEAD0001"}, "not needed"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := h.engine.Extend(ctx, expired.ID, record.Person{ID: "U0LEAD0001"}, time.Hour); err != nil {
		t.Fatalf("extend: %v", err)
	}
	h.clock.Advance(74 * time.Hour)
	if _, err := h.engine.ExpireDue(ctx); err != nil {
		t.Fatalf("expire: %v", err)
	}
	low := h.submit(refund("PAY-2", 5))
	ids = append(ids, low.ID)

	seen := map[record.Event]bool{}
	for _, id := range ids {
		evs, err := h.engine.AuditLog(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if !ev.Action.Valid() {
				t.Errorf("run %s recorded %q, which is not in record.Events", id, ev.Action)
			}
			seen[ev.Action] = true
		}
	}
	// The drive must have reached the events it was written for, or it checks little.
	for _, want := range []record.Event{record.EventSubmitted, record.EventRefused, record.EventReassigned, record.EventExtended,
		record.EventDecided, record.EventIntent, record.EventExecuted, record.EventFinished,
		record.EventForked, record.EventCancelled, record.EventExpired} {
		if !seen[want] {
			t.Errorf("no %s event among %v", want, seen)
		}
	}
}
