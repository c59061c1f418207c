package workflow_test

import (
	"os"
	"os/exec"
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
			if limited && strings.HasPrefix(imp, mod) && !slices.ContainsFunc(allowedImports, func(a string) bool { return under(imp, a) }) {
				t.Errorf("%s imports %s; of the module it may import only %v", pkg, imp, allowedImports)
			}
		}
	}
}

// readLayering reads the two kinds of rule of testdata/layering.txt: an
// import prefix and who may import it, or a package followed by a colon and
// the only packages of the module it may import ("-" for none).
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

// under reports whether pkg is path or inside it.
func under(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }
