package workflow_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDependenciesPointOneWay keeps the layering of the module: cmd → bot, api,
// demo, storage/* → workflow, with each driver and SDK imported by the packages
// testdata/layering.txt names (or their subpackages), and workflow importing no other package of the module.
func TestDependenciesPointOneWay(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const mod = "github.com/signoff-dev/signoff/"
	rules := map[string][]string{} // import prefix → allowed importers
	raw, err := os.ReadFile("testdata/layering.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, who := range strings.Split(f[1], ",") {
			rules[f[0]] = append(rules[f[0]], mod+who)
		}
	}
	if len(rules) < 4 {
		t.Fatalf("layering rules not read: %v", rules)
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			for lib, allowed := range rules {
				inside := slices.ContainsFunc(allowed, func(a string) bool { return pkg == a || strings.HasPrefix(pkg, a+"/") })
				if (imp == lib || strings.HasPrefix(imp, lib+"/")) && !inside {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
			if pkg == mod+"workflow" && strings.HasPrefix(imp, mod) {
				t.Errorf("workflow imports %s; the domain depends on no other package of the module", imp)
			}
			if strings.HasPrefix(pkg, mod+"storage/") && (strings.HasPrefix(imp, mod+"cmd") || strings.HasPrefix(imp, mod+"bot") || strings.HasPrefix(imp, mod+"demo")) {
				t.Errorf("%s imports %s; storage depends only on workflow", pkg, imp)
			}
		}
	}
}

// TestEdgesUseTheEngine keeps the store the engine's: the edges (bot, api,
// callback, metrics) reach runs, the outbox and the requests they have
// seen through the engine's methods and services, never through the store
// (no storage.Store, no storage.Tx, no Engine.Store), and nothing outside
// workflow and storage opens a transaction (an Update or View with a
// function to run in it). Test files are not held to it: tests seed and
// inspect stores directly.
func TestEdgesUseTheEngine(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const mod = "github.com/signoff-dev/signoff/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles "|"}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	under := func(pkg string, dirs ...string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return pkg == mod+d || strings.HasPrefix(pkg, mod+d+"/") })
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		pkg, dir, files := f[0], f[1], f[2:]
		if under(pkg, "workflow", "storage") {
			continue
		}
		edge := under(pkg, "bot", "api", "callback", "metrics")
		for _, name := range files {
			if name == "" {
				continue
			}
			for _, p := range storeUses(t, filepath.Join(dir, name), edge) {
				t.Errorf("%s: %s", pkg, p)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the package list was not read", checked)
	}
}

// storeUses lists where the file at path opens a transaction, and, for an
// edge, where it names the store or a transaction.
func storeUses(t *testing.T, path string, edge bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	wf := ""
	for _, imp := range file.Imports {
		if imp.Path.Value == `"github.com/signoff-dev/signoff/workflow"` {
			wf = "workflow"
			if imp.Name != nil {
				wf = imp.Name.Name
			}
		}
	}
	var found []string
	at := func(n ast.Node, what string) {
		found = append(found, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch name := sel.Sel.Name; {
			case (name == "Update" || name == "View") && len(n.Args) == 2:
				at(n, "opens a transaction ("+name+"); the engine's methods are to do it")
			case edge && name == "Store" && len(n.Args) == 0:
				at(n, "takes the engine's store; an edge uses the engine's services")
			}
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && edge && wf != "" && id.Name == wf && (n.Sel.Name == "Tx" || n.Sel.Name == "Store") {
				at(n, "names workflow."+n.Sel.Name+"; an edge uses the engine's services, not the store")
			}
		}
		return true
	})
	return found
}
