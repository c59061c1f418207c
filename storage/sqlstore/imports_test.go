package sqlstore

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoDriver keeps the core driver-free: the drivers adapt their own
// transactions to Conn, so the core needs neither database/sql nor a driver.
func TestImportsNoDriver(t *testing.T) {
	// zstd compresses the states it stores (state.go): no driver.
	leaves := []string{"github.com/signoff-dev/signoff/record", "github.com/signoff-dev/signoff/storage", "github.com/klauspost/compress/zstd"}
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
				thirdParty && !slices.Contains(leaves, path) {
				t.Errorf("%s imports %s; the core imports only the standard library (not database/sql), the records, the store contract and zstd", name, path)
			}
		}
	}
}
