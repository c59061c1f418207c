package console_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkInbox serves the inbox's first page, and a page deep in the
// list by its cursor, with many runs waiting (SIGNOFF_BENCH_WAITING, 5,000
// unless set), and reports the bytes a page weighs.
func BenchmarkInbox(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("SIGNOFF_BENCH_WAITING")); err == nil && v > 0 {
		n = v
	}
	h := newHarness(b, harnessOpts{})
	var mid string
	for i := range n {
		id := h.submit(b, bot, "refund", fmt.Sprintf(`{"amount":%d,"order":"A-%d"}`, i, i), "refund of order A-"+strconv.Itoa(i))
		if i == n/2 {
			mid = id
		}
	}
	v, err := h.engine.Get(b.Context(), mid)
	if err != nil {
		b.Fatal(err)
	}
	br := h.browser(b)
	br.login(lead)
	for _, tc := range []struct{ name, path string }{
		{"first page", "/ui/inbox"},
		{"deep page", fmt.Sprintf("/ui/inbox?after=%d.%s", v.CreatedAt.UnixMilli(), mid)},
		{"filtered by rule", "/ui/inbox?rule=refunds"},
	} {
		b.Run(fmt.Sprintf("%s/waiting=%d", tc.name, n), func(b *testing.B) {
			var size int
			for b.Loop() {
				p := br.get(tc.path)
				if p.status != http.StatusOK || strings.Count(p.body, `href="/ui/runs/`) != 50 {
					b.Fatalf("GET %s: %d, %d runs", tc.path, p.status, strings.Count(p.body, `href="/ui/runs/`))
				}
				size = len(p.body)
			}
			b.ReportMetric(float64(size)/1024, "KiB/page")
		})
	}
}
