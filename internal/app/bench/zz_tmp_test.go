package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/internal/benchkit"
)

func TestTmpClicks(t *testing.T) {
	ctx := context.Background()
	tg, err := benchkit.OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	eng, err := benchkit.NewEngine(tg.Store)
	if err != nil {
		t.Fatal(err)
	}
	figs, err := benchClicks(ctx, tg, eng, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		t.Logf("%s %d: %d ops cpu %.3f p50 %.2f", f.Name, f.Clients, f.Ops, f.CPUPerOp, f.P50)
	}
}
