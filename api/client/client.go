// Package client is a typed Go client of signoff's agent API (/v1), built on
// the client oapi-codegen generates from api/openapi.yaml. Every method takes
// the context first; a refusal comes back as *Error with the problem's code.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/api"
	"github.com/signoff-dev/signoff/workflow"
)

// Client calls one signoff server with one token.
type Client struct {
	c *api.ClientWithResponses
}

// New returns a client of the server at baseURL (e.g. https://signoff.example.com,
// without /v1) that sends token. hc may be nil (http.DefaultClient).
func New(baseURL, token string, hc *http.Client) (*Client, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	c, err := api.NewClientWithResponses(strings.TrimRight(baseURL, "/")+"/v1",
		api.WithHTTPClient(hc),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("new signoff client: %w", err)
	}
	return &Client{c: c}, nil
}

// Error is a refusal: the problem the server answered, and for a 429 how
// long to wait.
type Error struct {
	api.Problem
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("signoff: %d %s", e.Status, e.Code)
	if e.Detail != nil {
		s += ": " + *e.Detail
	}
	return s
}

// refusal reads a non-2xx answer as *Error.
func refusal(r *http.Response, body []byte) error {
	e := &Error{}
	if err := json.Unmarshal(body, &e.Problem); err != nil || e.Code == "" {
		return fmt.Errorf("signoff: %s (not a problem document: %.200q)", r.Status, body)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// Submitted is the answer to Submit.
type Submitted struct {
	api.SubmitResult
	Location string // the run's URL path, for a new run
}

// Submit proposes; Replayed says the idempotency key returned the first run.
func (c *Client) Submit(ctx context.Context, p *workflow.Proposal) (*Submitted, error) {
	r, err := c.c.SubmitRunWithResponse(ctx, *p)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	switch {
	case r.JSON201 != nil:
		return &Submitted{SubmitResult: *r.JSON201, Location: r.HTTPResponse.Header.Get("Location")}, nil
	case r.JSON200 != nil:
		return &Submitted{SubmitResult: *r.JSON200}, nil
	}
	return nil, refusal(r.HTTPResponse, r.Body)
}

// Get reads a run (redacted as people see it).
func (c *Client) Get(ctx context.Context, id string) (*workflow.RunView, error) {
	r, err := c.c.GetRunWithResponse(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	if r.JSON200 == nil {
		return nil, refusal(r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}

// ListOptions filter a list; zero values are left out. The list holds only
// the token's requester's runs: Requester may name only that one. Cursor goes
// with the Statuses, TaskID and Requester of the page it came from.
type ListOptions struct {
	Statuses  []record.Status
	TaskID    string
	Requester string
	Limit     int
	Cursor    string
}

// List reads one page of runs, oldest first; NextCursor is nil on the last.
func (c *Client) List(ctx context.Context, o ListOptions) (*api.RunList, error) {
	var p api.ListRunsParams
	if len(o.Statuses) > 0 {
		s := make([]string, len(o.Statuses))
		for i, st := range o.Statuses {
			s[i] = string(st)
		}
		p.Status = &s
	}
	if o.TaskID != "" {
		p.TaskId = &o.TaskID
	}
	if o.Requester != "" {
		p.Requester = &o.Requester
	}
	if o.Limit > 0 {
		p.Limit = &o.Limit
	}
	if o.Cursor != "" {
		p.Cursor = &o.Cursor
	}
	r, err := c.c.ListRunsWithResponse(ctx, &p)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if r.JSON200 == nil {
		return nil, refusal(r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}

// Wait waits up to timeout (whole seconds, at most 120) for the run to
// leave from ("" for its status now).
func (c *Client) Wait(ctx context.Context, id string, timeout time.Duration, from record.Status) (*api.WaitResult, error) {
	secs := int(timeout / time.Second)
	p := api.WaitRunParams{Timeout: &secs}
	if from != "" {
		s := api.Status(from)
		p.Status = &s
	}
	r, err := c.c.WaitRunWithResponse(ctx, id, &p)
	if err != nil {
		return nil, fmt.Errorf("wait for run %s: %w", id, err)
	}
	if r.JSON200 == nil {
		return nil, refusal(r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}

// Cancel cancels a run that has not started executing.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*workflow.RunView, error) {
	r, err := c.c.CancelRunWithResponse(ctx, id, api.CancelRequest{Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	if r.JSON200 == nil {
		return nil, refusal(r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}
