package sqlstore

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoDriver keeps the core driver-free: the drivers adapt their own
// transactions to Conn, so the core needs neither database/sql nor a driver.
func TestImportsNoDriver(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			thirdParty := strings.Contains(strings.Split(path, "/")[0], ".")
			if path == "database/sql" || strings.HasPrefix(path, "database/sql/") ||
				thirdParty && path != "github.com/signoff-dev/signoff/workflow" {
				t.Errorf("%s imports %s; the core imports only the standard library (not database/sql) and workflow", name, path)
			}
		}
	}
}
