package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// PageSize is how many runs a page of the inbox lists.
const PageSize = 50

// maxScan bounds how many runs one page reads looking for those a filter
// of the checkpoint's content (the action) keeps: past it the page ends
// early and its next link goes on from where it stopped. Rule and text are
// the store's to filter.
const maxScan = 2000

// tabs are the inbox's lists: the status each shows.
type tab struct {
	Name, Label string
	Status      record.Status
}

var tabs = []tab{
	{"waiting", "Waiting", record.StatusWaitingApproval},
	{"scheduled", "Scheduled", record.StatusScheduled},
	{"attention", "Needs attention", record.StatusNeedsAttention},
	{"reviews", "Break-glass reviews", ""},
}

// filter is the inbox's query, all of it in the URL.
type filter struct {
	Tab       string
	Rule      string
	Requester string
	Action    string
	Text      string
	After     string // the cursor: "<created unix ms>.<run id>"
}

func filterOf(q url.Values) filter {
	f := filter{Tab: q.Get("tab"), Rule: q.Get("rule"), Requester: q.Get("requester"), Action: q.Get("action"), Text: q.Get("q"), After: q.Get("after")}
	if q.Get("status") != "" && f.Tab == "" {
		for _, t := range tabs {
			if string(t.Status) == q.Get("status") {
				f.Tab = t.Name
			}
		}
	}
	if !slices.ContainsFunc(tabs, func(t tab) bool { return t.Name == f.Tab }) {
		f.Tab = "waiting"
	}
	return f
}

// query is f as a URL query, with after as its cursor.
func (f filter) query(after string) string {
	v := url.Values{}
	v.Set("tab", f.Tab)
	for k, s := range map[string]string{"rule": f.Rule, "requester": f.Requester, "action": f.Action, "q": f.Text, "after": after} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

func (f filter) status() record.Status {
	for _, t := range tabs {
		if t.Name == f.Tab {
			return t.Status
		}
	}
	return record.StatusWaitingApproval
}

// keeps says whether v passes the filter the store cannot apply: the
// action, which only the checkpoint holds.
func (f filter) keeps(v *workflow.RunView) bool {
	return f.Action == "" || slices.ContainsFunc(v.Actions, func(a record.Action) bool { return a.Name == f.Action })
}

// maxText bounds the inbox's text search.
const maxText = 200

// inboxRow is one run as the inbox lists it.
type inboxRow struct {
	ID        string
	Age       string
	Created   time.Time
	Rule      string
	Risk      string
	Deciders  string // who may decide, in words
	Groups    []groupRow
	Deadline  string
	Requester string
	Summary   string
	Actions   string
	MayDecide bool
	Problem   string
}

// groupRow is one place of a composite requirement: who fills it, how far.
type groupRow struct {
	Label  string
	Filled string
	Done   bool
}

type tabLink struct {
	Label, Query string // Query is the tab's link
	Current      bool
}

type inboxData struct {
	Tabs    []tabLink
	Filter  filter
	Rows    []inboxRow
	Reviews []reviewRow
	Next    string // the next page's link, "" on the last
	Scanned int
	Cut     bool // the page stopped at maxScan runs read
}

type reviewRow struct {
	RunID, Rule, Role, ForcedBy, Reason, Due string
	Overdue                                  bool
}

func (c *Console) inbox(w http.ResponseWriter, r *http.Request, se *session) {
	f := filterOf(r.URL.Query())
	d := inboxData{Filter: f}
	for _, t := range tabs {
		d.Tabs = append(d.Tabs, tabLink{Label: t.Label, Query: c.cfg.Prefix + "/inbox?" + filter{Tab: t.Name}.query(""), Current: t.Name == f.Tab})
	}
	var err error
	if f.Tab == "reviews" {
		d.Reviews, err = c.reviews(r, f)
	} else {
		err = c.runRows(r, se, f, &d)
	}
	if d.Next != "" {
		d.Next = c.cfg.Prefix + "/inbox?" + d.Next
	}
	if err != nil {
		var bad badQuery
		if asBadQuery(err, &bad) {
			c.problem(w, r, se, http.StatusBadRequest, bad.Error())
			return
		}
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "inbox", c.newPage(se, "Inbox", d))
}

// badQuery is a query the inbox cannot read.
type badQuery struct{ msg string }

func (b badQuery) Error() string { return b.msg }

func asBadQuery(err error, out *badQuery) bool {
	b, ok := err.(badQuery)
	if ok {
		*out = b
	}
	return ok
}

// cursorOf reads an after= cursor.
func cursorOf(s string) (time.Time, string, error) {
	ms, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", badQuery{"after: not a cursor of this inbox; follow the page's next link, or start again without after="}
	}
	return time.UnixMilli(n).UTC(), id, nil
}

// runRows reads one page of runs in the tab's status, by keyset from the
// cursor, keeping those the filters keep; the viewer's own decisions first.
func (c *Console) runRows(r *http.Request, se *session, f filter, d *inboxData) error {
	if len(f.Text) > maxText {
		return badQuery{fmt.Sprintf("q: %d bytes; search for at most %d", len(f.Text), maxText)}
	}
	rf := storage.RunFilter{Statuses: []record.Status{f.status()}, RequesterID: f.Requester, Rule: f.Rule, Text: f.Text, Limit: PageSize + 1}
	if f.After != "" {
		t, id, err := cursorOf(f.After)
		if err != nil {
			return err
		}
		rf.AfterCreated, rf.AfterID = t, id
	}
	var kept []*workflow.RunView
	var last *workflow.RunView
	for d.Scanned < maxScan {
		views, err := c.eng.ListViews(r.Context(), rf)
		if err != nil {
			return err
		}
		for _, v := range views {
			d.Scanned++
			last = v
			if f.keeps(v) {
				kept = append(kept, v)
			}
			if len(kept) > PageSize {
				break
			}
		}
		if len(kept) > PageSize {
			kept = kept[:PageSize]
			last = kept[PageSize-1]
			d.Next = f.query(cursorText(last))
			break
		}
		if len(views) < rf.Limit {
			break // the end of the list
		}
		rf.AfterCreated, rf.AfterID = last.CreatedAt, last.ID
		if d.Scanned >= maxScan {
			d.Cut = true
			d.Next = f.query(cursorText(last))
		}
	}
	now := c.clock.Now()
	for _, v := range kept {
		d.Rows = append(d.Rows, c.row(r, se, v, now))
	}
	// The runs the viewer may decide first, each part in the list's order.
	slices.SortStableFunc(d.Rows, func(a, b inboxRow) int {
		switch {
		case a.MayDecide == b.MayDecide:
			return 0
		case a.MayDecide:
			return -1
		}
		return 1
	})
	return nil
}

func cursorText(v *workflow.RunView) string {
	return strconv.FormatInt(v.CreatedAt.UnixMilli(), 10) + "." + v.ID
}

func (c *Console) row(r *http.Request, se *session, v *workflow.RunView, now time.Time) inboxRow {
	row := inboxRow{ID: v.ID, Created: v.CreatedAt, Age: ago(now, v.CreatedAt), Requester: v.Requester.ID,
		Summary: v.Summary, Actions: actionNames(v.Actions), Problem: v.Problem}
	if v.Deadline != nil {
		row.Deadline = until(now, *v.Deadline)
	}
	g := v.Gate
	if g == nil {
		return row
	}
	row.Rule, row.Risk = g.Rule, string(g.Risk)
	if a := g.Approval; a != nil {
		row.Deciders = deciders(a, g.Assignee)
		row.MayDecide = c.mayDecide(se.Who.Member, v)
		if a.Requirement != nil {
			row.Groups = c.groups(r, v.ID)
		}
	}
	return row
}

// mayDecide says whether member could decide v as far as the inbox can
// tell: their role is at least the rule's lowest, and the run is not their
// own unless the rule allows it. The engine's Decide has the last word.
func (c *Console) mayDecide(member string, v *workflow.RunView) bool {
	a := v.Gate.Approval
	role, ok := c.eng.Roles().RoleOf(member)
	if !ok || !c.eng.Roles().AtLeast(role, a.Role) {
		return false
	}
	return a.SelfApproval || v.Requester.ID != member
}

// deciders says who may decide, in words.
func deciders(a *record.ApprovalSpec, assignee string) string {
	s := fmt.Sprintf("%d × %s or above", max(a.Count, 1), a.Role)
	if a.Requirement != nil {
		s = "composite: at least " + s
	}
	if assignee != "" {
		s += ", assigned to " + assignee
	}
	return s
}

// groups reads a composite run's progress (its requests and decisions,
// which the list does not read) and says it per place of the requirement.
func (c *Console) groups(r *http.Request, id string) []groupRow {
	v, err := c.eng.Get(r.Context(), id)
	if err != nil || v.Progress == nil {
		return []groupRow{{Label: "progress unreadable"}}
	}
	var out []groupRow
	for _, l := range v.Progress.Leaves {
		who := l.Role + " or above"
		if len(l.Users) > 0 {
			who = strings.Join(l.Users, ", ")
		}
		n := max(l.Count, 1)
		filled := fmt.Sprintf("%d of %d", len(l.By), n)
		if len(l.By) > 0 {
			filled += ": " + strings.Join(l.By, ", ")
		}
		out = append(out, groupRow{Label: who, Filled: filled, Done: len(l.By) >= n})
	}
	return out
}

// reviews are the open break-glass reviews, soonest due first.
func (c *Console) reviews(r *http.Request, f filter) ([]reviewRow, error) {
	rs, err := c.eng.PendingReviews(r.Context())
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	var out []reviewRow
	for _, rv := range rs {
		if f.Rule != "" && rv.Rule != f.Rule {
			continue
		}
		out = append(out, reviewRow{RunID: rv.RunID, Rule: rv.Rule, Role: rv.Role, ForcedBy: rv.ForcedBy, Reason: rv.Reason,
			Due: until(now, rv.Due), Overdue: now.After(rv.Due)})
	}
	return out, nil
}

func actionNames(as []record.Action) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// ago says how long ago t was, roughly.
func ago(now, t time.Time) string { return span(now.Sub(t)) + " ago" }

// until says when t is from now, roughly.
func until(now, t time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + span(d) + " (" + t.UTC().Format("2006-01-02 15:04 UTC") + ")"
	}
	return span(now.Sub(t)) + " ago (" + t.UTC().Format("2006-01-02 15:04 UTC") + ")"
}

func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
