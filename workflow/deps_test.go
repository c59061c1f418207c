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

// TestDependenciesPointOneWay keeps the layering of the module that
// testdata/layering.txt writes down: which packages may import each driver,
// SDK and edge, and which packages of the module each lower layer may import
// at all (the leaves none, the drivers only the leaves, the engine only the
// leaves, policy and its own machinery).
func TestDependenciesPointOneWay(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const mod = "github.com/signoff-dev/signoff/"
	importers, only := readLayering(t, mod)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		allowedImports, limited := ruleFor(only, pkg)
		for _, imp := range imports {
			for lib, allowed := range importers {
				if under(imp, lib) && !slices.ContainsFunc(allowed, func(a string) bool { return under(pkg, a) }) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
			if limited && strings.HasPrefix(imp, mod) && !slices.ContainsFunc(allowedImports, func(a string) bool { return allows(a, imp) }) {
				t.Errorf("%s imports %s; of the module it may import only %v", pkg, imp, allowedImports)
			}
		}
	}
}

// readLayering reads the two kinds of rule of testdata/layering.txt: an
// import prefix and who may import it, or a package followed by a colon and
// the only packages of the module it may import ("-" for none; "x/..." is x
// and every package inside it).
func readLayering(t *testing.T, mod string) (importers, only map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile("testdata/layering.txt")
	if err != nil {
		t.Fatal(err)
	}
	importers, only = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if pkg, ok := strings.CutSuffix(f[0], ":"); ok {
			only[mod+pkg] = []string{}
			for _, imp := range strings.Split(f[1], ",") {
				if imp != "-" {
					only[mod+pkg] = append(only[mod+pkg], mod+imp)
				}
			}
			continue
		}
		for _, who := range strings.Split(f[1], ",") {
			importers[f[0]] = append(importers[f[0]], mod+who)
		}
	}
	if len(importers) < 4 || len(only) < 4 {
		t.Fatalf("layering rules not read: %v %v", importers, only)
	}
	return importers, only
}

// ruleFor is the "imports only" rule of pkg: that of the longest package
// named that is pkg or holds it.
func ruleFor(only map[string][]string, pkg string) (allowed []string, ok bool) {
	best := ""
	for p := range only {
		if under(pkg, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, false
	}
	return only[best], true
}

// allows reports whether the allowed import a ("x", or "x/..." for x and
// every package inside it) covers imp.
func allows(a, imp string) bool {
	if tree, ok := strings.CutSuffix(a, "/..."); ok {
		return under(imp, tree)
	}
	return imp == a
}

// under reports whether pkg is path or inside it.
func under(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }

// TestEdgesUseTheEngine keeps the store the engine's: the edges (bot, api, mcpserver,
// mcpgateway, callback, metrics, console) reach runs, the outbox and the requests they have
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
		edge := under(pkg, "bot", "api", "callback", "metrics", "mcpserver", "mcpgateway", "console")
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
	st := ""
	for _, imp := range file.Imports {
		if imp.Path.Value == `"github.com/signoff-dev/signoff/storage"` {
			st = "storage"
			if imp.Name != nil {
				st = imp.Name.Name
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
			if id, ok := n.X.(*ast.Ident); ok && edge && st != "" && id.Name == st && (n.Sel.Name == "Tx" || n.Sel.Name == "Store") {
				at(n, "names storage."+n.Sel.Name+"; an edge uses the engine's services, not the store")
			}
		}
		return true
	})
	return found
}
