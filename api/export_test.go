package api

import (
	"bytes"
	"net/http/httptest"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/workflow"
)

// Scopes is the route → scope table, for the test that holds it to the document.
var Scopes = scopes

// DecodeCursor decodes a cursor and encodes it back, for fuzzing.
func DecodeCursor(s string) (string, error) {
	c, err := decodeCursor(s)
	if err != nil {
		return "", err
	}
	return c.encode(), nil
}

// BindProposal decodes a proposal body as POST /v1/runs does.
func BindProposal(body []byte) (*workflow.Proposal, error) {
	e := echo.New()
	req := httptest.NewRequest("POST", "/v1/runs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var p workflow.Proposal
	if err := (strictBinder{}).Bind(&p, e.NewContext(req, httptest.NewRecorder())); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListFilter and WaitTimeout check query parameters as the handlers do.
var (
	ListFilter  = listFilter
	WaitTimeout = waitTimeout
)
