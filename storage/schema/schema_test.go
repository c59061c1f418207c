package schema

import (
	"errors"
	"strings"
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

func TestMissing(t *testing.T) {
	files := []File{
		{Migration: Migration{Version: 1, Name: "init"}},
		{Migration: Migration{Version: 2, Name: "replay_cache"}},
		{Migration: Migration{Version: 3, Name: "integrity"}},
	}
	for _, tc := range []struct {
		applied []int
		want    string
	}{
		{[]int{1, 2, 3}, ""},
		{[]int{1, 2}, "schema version 3 (integrity) is not applied; run it"},
		{nil, "schema versions 1 (init), 2 (replay_cache), 3 (integrity) are not applied; run it"},
	} {
		err := Missing(files, tc.applied, "run it")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("applied %v: %v", tc.applied, err)
		case tc.want != "" && (!errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("applied %v: %v, want ErrNotMigrated saying %q", tc.applied, err, tc.want)
		}
	}
}
