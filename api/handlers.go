package api

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

// List page sizes and wait timeouts.
const (
	DefaultLimit   = 50
	MaxLimit       = 200
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 120 * time.Second
)

// handlers implements the generated StrictServerInterface.
type handlers struct {
	engine   *workflow.Engine
	stopping <-chan struct{} // closed when the server shuts down
	cursors  *cursorSeal
}

var _ StrictServerInterface = (*handlers)(nil)

// inRun names the run a refusal is about, when the refusal does not.
func inRun(err error, id string) error {
	pe, _ := toProblem(err)
	if pe.p.RunId == nil && pe.p.Status < 500 {
		return pe.withRun(id)
	}
	return err
}

func (h *handlers) SubmitRun(ctx context.Context, req SubmitRunRequestObject) (SubmitRunResponseObject, error) {
	p := req.Body
	tok := tokenOf(echoContext(ctx))
	switch {
	case p.Requester.ID == "":
		p.Requester.ID = tok.Requester
	case p.Requester.ID != tok.Requester:
		return nil, problem(http.StatusForbidden, CodeRequesterMismatch,
			"this token speaks for requester "+tok.Requester+"; leave requester.id out, or use the token of the requester you name")
	}
	run, replayed, err := h.engine.SubmitReplay(ctx, p)
	if err != nil {
		return nil, err
	}
	v, err := h.engine.Get(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	res := submitResult(v, replayed)
	if replayed {
		yes := "true"
		return SubmitRun200JSONResponse{Body: res, Headers: SubmitRun200ResponseHeaders{IdempotentReplayed: &yes}}, nil
	}
	loc := "/v1/runs/" + run.ID
	return SubmitRun201JSONResponse{Body: res, Headers: SubmitRun201ResponseHeaders{Location: &loc}}, nil
}

// submitResult is the short answer to a submit: where the run stands and,
// while it waits, who may approve it and by when.
func submitResult(v *workflow.RunView, replayed bool) SubmitResult {
	res := SubmitResult{Id: v.ID, Status: Status(v.Status), Replayed: replayed}
	if v.Fingerprint != "" {
		res.Fingerprint = &v.Fingerprint
	}
	if v.Reason != "" {
		res.Reason = &v.Reason
	}
	if g := v.Gate; v.Status == record.StatusWaitingApproval && g != nil && g.Approval != nil && v.Deadline != nil {
		approved := 0
		for _, d := range v.Decisions {
			if d.RequestID == g.RequestID && d.Decision == record.VerdictApprove {
				approved++
			}
		}
		a := &ApprovalNeeded{Role: g.Approval.Role, Count: g.Approval.Count, Remaining: max(g.Approval.Count-approved, 0), Deadline: *v.Deadline}
		if v.Progress != nil {
			// One person fills one place: approvals so far may fill none.
			a.Remaining = v.Progress.Remaining
		}
		if g.Assignee != "" {
			a.Assignee = &g.Assignee
		}
		res.Approval = a
	}
	return res
}

func (h *handlers) shown(v *workflow.RunView) workflow.RunView {
	if v.Problem != "" {
		// The stored run failed its check, so nothing in it says whose it
		// is: the run row that named this token's requester may have been
		// changed to. The agent learns that the run is damaged and no more.
		return workflow.RunView{ID: v.ID, Workflow: v.Workflow, Status: record.StatusNeedsAttention, Problem: v.Problem,
			Requester: v.Requester, Actions: []record.Action{}, Evidence: []record.Evidence{}, Checks: []record.Check{},
			Requests: []workflow.RequestView{}, Decisions: []workflow.DecisionView{}, Operations: []workflow.OperationView{},
			CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
	}
	return *workflow.RedactedView(v, h.engine.Action)
}

// own reads a run of the token's requester. Another requester's run is
// refused exactly as a run that does not exist, with the engine's own
// refusal, so that an agent learns nothing of runs it did not submit.
func (h *handlers) own(ctx context.Context, id string) (*workflow.RunView, error) {
	v, err := h.engine.Get(ctx, id)
	if err != nil {
		return nil, inRun(err, id)
	}
	if v.Requester.ID != tokenOf(echoContext(ctx)).Requester {
		return nil, workflow.UnknownRun(id)
	}
	return v, nil
}

func (h *handlers) GetRun(ctx context.Context, req GetRunRequestObject) (GetRunResponseObject, error) {
	v, err := h.own(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return GetRun200JSONResponse(h.shown(v)), nil
}

func (h *handlers) ListRuns(ctx context.Context, req ListRunsRequestObject) (ListRunsResponseObject, error) {
	f, err := listFilter(req.Params, tokenOf(echoContext(ctx)).Requester, h.cursors)
	if err != nil {
		return nil, err
	}
	limit := f.Limit
	f.Limit++ // one more than the page, to know whether there is a next one
	views, err := h.engine.ListViews(ctx, f)
	if err != nil {
		return nil, err
	}
	out := RunList{Runs: make([]Run, 0, min(len(views), limit))}
	for i, v := range views {
		if i == limit {
			last := views[i-1]
			next := h.cursors.encode(cursor{created: last.CreatedAt, id: last.ID, filter: filterKey(f)})
			out.NextCursor = &next
			break
		}
		out.Runs = append(out.Runs, h.shown(v))
	}
	return ListRuns200JSONResponse(out), nil
}

// listFilter checks a list's query and turns it into the store's filter,
// which keeps only the runs of requester (the token's): naming another
// requester is refused rather than answered with an empty page, so that an
// agent that asks for what it may not see is told so. A cursor must bear
// seal's seal.
func listFilter(p ListRunsParams, requester string, seal *cursorSeal) (storage.RunFilter, error) {
	f := storage.RunFilter{Limit: DefaultLimit, RequesterID: requester}
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > MaxLimit {
			return f, fieldProblem("limit", "want 1 to 200")
		}
		f.Limit = *p.Limit
	}
	if p.Status != nil {
		for _, list := range *p.Status {
			for _, s := range strings.Split(list, ",") {
				st := record.Status(strings.ToLower(strings.TrimSpace(s)))
				if !st.Valid() {
					return f, fieldProblem("status", "unknown status "+quote(s))
				}
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	if p.TaskId != nil {
		f.TaskID = *p.TaskId
	}
	if p.Requester != nil && *p.Requester != requester {
		return f, problem(http.StatusForbidden, CodeRequesterMismatch,
			"this token reads only the runs of requester "+requester+"; leave requester out, or use the token of the requester you name")
	}
	if p.Cursor != nil {
		c, err := seal.decode(*p.Cursor)
		if err != nil {
			return f, problem(http.StatusBadRequest, CodeInvalidCursor, "cursor: "+err.Error()+"; pass next_cursor as it came")
		}
		if c.filter != filterKey(f) {
			return f, problem(http.StatusBadRequest, CodeInvalidCursor,
				"cursor: made for another filter; send the status and task_id it was made with, or start again without a cursor")
		}
		f.AfterCreated, f.AfterID = c.created, c.id
	}
	return f, nil
}

// quote shows a value the caller sent, bounded; JSON encoding keeps it inert.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}

func fieldProblem(field, msg string) *problemError {
	pe := problem(http.StatusBadRequest, record.CodeInvalidInput, field+": "+msg)
	pe.p.Errors = &[]FieldError{{Field: field, Message: msg}}
	return pe
}

// waitTimeout checks the timeout parameter (seconds).
func waitTimeout(p *int) (time.Duration, error) {
	if p == nil {
		return DefaultTimeout, nil
	}
	if *p < 0 || time.Duration(*p)*time.Second > MaxTimeout {
		return 0, fieldProblem("timeout", "want 0 to 120 seconds")
	}
	return time.Duration(*p) * time.Second, nil
}

func (h *handlers) WaitRun(ctx context.Context, req WaitRunRequestObject) (WaitRunResponseObject, error) {
	d, err := waitTimeout(req.Params.Timeout)
	if err != nil {
		return nil, err
	}
	var from record.Status
	if req.Params.Status != nil {
		if from = record.Status(*req.Params.Status); !from.Valid() {
			return nil, fieldProblem("status", "unknown status "+quote(string(from)))
		}
	}
	v, err := h.own(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	if from == "" {
		// The status to wait on is read here, so that a wait that ends
		// before its first read answers "unchanged", as it should.
		from = v.Status
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-wctx.Done():
		}
	}()
	v, changed, err := h.engine.WaitRun(wctx, req.Id, from)
	if err != nil {
		return nil, inRun(err, req.Id)
	}
	return WaitRun200JSONResponse{Changed: changed, Run: h.shown(v)}, nil
}

func (h *handlers) CancelRun(ctx context.Context, req CancelRunRequestObject) (CancelRunResponseObject, error) {
	tok := tokenOf(echoContext(ctx))
	if strings.TrimSpace(req.Body.Reason) == "" {
		return nil, fieldProblem("reason", "required: why the run is cancelled")
	}
	// Checked before the engine is asked, so that a refused cancel of a run
	// the token may not see leaves no trace of it either.
	if _, err := h.own(ctx, req.Id); err != nil {
		return nil, err
	}
	if _, err := h.engine.Cancel(ctx, req.Id, record.Person{ID: tok.Requester}, req.Body.Reason); err != nil {
		return nil, inRun(err, req.Id)
	}
	v, err := h.engine.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return CancelRun200JSONResponse(h.shown(v)), nil
}

func (h *handlers) ResolveRun(ctx context.Context, req ResolveRunRequestObject) (ResolveRunResponseObject, error) {
	tok := tokenOf(echoContext(ctx))
	if strings.TrimSpace(req.Body.Reason) == "" {
		return nil, fieldProblem("reason", "required: what was checked at the target")
	}
	in := workflow.ResolveInput{RunID: req.Id, By: record.Person{ID: tok.Requester}, Choice: record.Resolution(req.Body.Choice),
		Reason: req.Body.Reason, Via: "api"}
	if req.Body.Receipt != nil {
		in.Receipt = *req.Body.Receipt
	}
	if _, err := h.engine.Resolve(ctx, in); err != nil {
		return nil, inRun(err, req.Id)
	}
	v, err := h.engine.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return ResolveRun200JSONResponse(h.shown(v)), nil
}

func (h *handlers) GetOpenAPI(ctx context.Context, req GetOpenAPIRequestObject) (GetOpenAPIResponseObject, error) {
	return GetOpenAPI200ApplicationyamlResponse{Body: bytes.NewReader(Spec), ContentLength: int64(len(Spec))}, nil
}
