package schema

import (
	"errors"
	"testing"
	"testing/fstest"
)

func TestParseRefusesGapsAndBadNames(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"gap":        {"migrations/001_a.sql", "migrations/003_c.sql"},
		"repeat":     {"migrations/001_a.sql", "migrations/001_b.sql"},
		"no name":    {"migrations/001.sql"},
		"not number": {"migrations/one_a.sql"},
		"zero":       {"migrations/000_a.sql"},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range files {
				fsys[f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
			}
			if _, err := Parse(fsys); err == nil {
				t.Errorf("Parse(%v) succeeded; want an error", files)
			}
		})
	}
}

func TestParseOrdersAndChecksums(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/002_more.sql": {Data: []byte("CREATE TABLE b (x);")},
		"migrations/001_init.sql": {Data: []byte("CREATE TABLE a (x);")},
	}
	got, err := Parse(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "init" || got[1].Version != 2 || got[0].SQL != "CREATE TABLE a (x);" {
		t.Fatalf("parsed %+v", got)
	}
	if got[0].Checksum == got[1].Checksum || len(got[0].Checksum) != 64 {
		t.Fatalf("checksums %q %q", got[0].Checksum, got[1].Checksum)
	}
	if v := Versions(got); len(v) != 2 || v[1] != (Migration{2, "more"}) {
		t.Fatalf("versions %+v", v)
	}
	if errors.Is(ErrTooNew, ErrChanged) {
		t.Fatal("the two refusals must be told apart")
	}
}
