package api

import (
	"bytes"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/workflow"
)

// Scopes is the route → scope table, for the test that holds it to the document.
var Scopes = scopes

// TestCursorKey is the key the exported cursor helpers seal with.
var TestCursorKey = []byte("0123456789abcdef0123456789abcdef")

var testSeal, _ = newCursorSeal([][]byte{TestCursorKey})

// DecodeCursor decodes a cursor sealed with TestCursorKey and encodes it
// back, for fuzzing.
func DecodeCursor(s string) (string, error) {
	c, err := testSeal.decode(s)
	if err != nil {
		return "", err
	}
	return testSeal.encode(c), nil
}

// EncodeCursor seals a cursor with keys, as a server with those keys would
// give it out.
func EncodeCursor(keys [][]byte, created time.Time, filter storage.RunFilter, id string) string {
	s, err := newCursorSeal(keys)
	if err != nil {
		panic(err)
	}
	return s.encode(cursor{created: created, id: id, filter: filterKey(filter)})
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
	ListFilter = func(p ListRunsParams, requester string) (storage.RunFilter, error) {
		return listFilter(p, requester, testSeal)
	}
	WaitTimeout = waitTimeout
)
