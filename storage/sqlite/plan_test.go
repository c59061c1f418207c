package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/storage/sqlstore"
)

// TestListPagesUseAnIndex: every page of a run list, first or later, with
// each filter the agent API takes, walks an index instead of scanning the
// runs table.
func TestListPagesUseAnIndex(t *testing.T) {
	path := tempPath(t)
	openStore(t, path)
	db, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	after := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		f    storage.RunFilter
	}{
		{"no filter", storage.RunFilter{}},
		{"one status", storage.RunFilter{Statuses: []record.Status{record.StatusDone}}},
		{"several statuses", storage.RunFilter{Statuses: []record.Status{record.StatusDone, record.StatusFailed}}},
		{"a task", storage.RunFilter{TaskID: "T-1"}},
		{"a requester", storage.RunFilter{RequesterID: "agent:a"}},
		{"a requester and a status", storage.RunFilter{RequesterID: "agent:a", Statuses: []record.Status{record.StatusDone}}},
		{"a task, after a cursor", storage.RunFilter{TaskID: "T-1", AfterCreated: after, AfterID: "run_1"}},
		{"after a cursor", storage.RunFilter{AfterCreated: after, AfterID: "run_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.Limit = 51
			q, args := sqlstore.ListRunHeadsQuery(tt.f)
			rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, step := range plan {
				if strings.HasPrefix(step, "SCAN r") && !strings.Contains(step, "INDEX") {
					t.Errorf("the runs table is scanned: %s", strings.Join(plan, " | "))
				}
			}
			if !strings.Contains(strings.Join(plan, " | "), "runs_") {
				t.Errorf("no runs index in the plan: %s", strings.Join(plan, " | "))
			}
		})
	}
}
