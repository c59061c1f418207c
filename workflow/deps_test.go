package workflow_test

import (
	"os"
	"os/exec"
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
