package mcpgateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/signoff-dev/signoff/internal/bearer"
	"github.com/signoff-dev/signoff/internal/mcphttp"
)

// MaxBodyBytes caps an HTTP request's body: a call's arguments and room
// for the JSON-RPC envelope.
const MaxBodyBytes = maxArgs + 64<<10

// HTTPConfig is what the streamable HTTP handler checks.
type HTTPConfig struct {
	// Tokens name the requester each caller's calls speak for (mcp.identities,
	// or the agent API's tokens); a token with OperatorScope names the
	// person who decides through the operator tools (mcp.operators).
	Tokens []bearer.Token
	// Rate (requests a second) and Burst bound each token's calls.
	Rate  float64
	Burst int
	Now   func() time.Time
	// Origins are the browser origins allowed to call; a request with
	// another Origin header is refused.
	Origins []string
}

// Handler is the gateway over streamable HTTP, stateless (each POST a whole
// exchange, as the 2026-07-28 revision has it): a broken stream comes back
// as the same call made again, which attaches to the same run. The Origin,
// the token and its rate are checked and the body capped before the SDK
// reads anything.
func (g *Gateway) Handler(cfg HTTPConfig) (http.Handler, error) {
	agents := g.build(fromToken, nil)
	h, err := mcphttp.Handler(agents, mcphttp.Config{Tokens: cfg.Tokens, Rate: cfg.Rate, Burst: cfg.Burst, Now: cfg.Now,
		Origins: cfg.Origins, MaxBodyBytes: MaxBodyBytes, Logger: g.log, Ahead: g.tasksOverHTTP,
		// A token of mcp.operators is served the operator tools alone, as
		// its person; any other, the upstreams' tools alone.
		For: func(tok *auth.TokenInfo) *mcp.Server {
			if tok != nil && slices.Contains(tok.Scopes, OperatorScope) {
				return g.operatorMCP(tok.UserID)
			}
			return agents
		}})
	if errors.Is(err, mcphttp.ErrNoTokens) {
		return nil, errors.New("mcp gateway over http: no token is configured (mcp.identities or api.tokens): every call needs one")
	}
	return h, err
}

// tasksOverHTTP answers the Tasks extension's requests (see intercept) of a
// POST, for the requester of its token, as one JSON response; anything
// else goes on to the SDK with the body it sent.
func (g *Gateway) tasksOverHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		if r.Method != http.MethodPost || ti == nil || ti.UserID == "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "the body could not be read (at most "+strconv.Itoa(MaxBodyBytes)+" bytes)", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msg, err := jsonrpc.DecodeMessage(body)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok {
			next.ServeHTTP(w, r)
			return
		}
		answer, ok := g.intercept(r.Context(), ti.UserID, req)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		b, err := jsonrpc.EncodeMessage(answer(r.Context()))
		if err != nil {
			http.Error(w, "internal error: the answer cannot be encoded", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(b); err != nil {
			g.log.Debug("mcp task answer not sent", "method", req.Method, "err", err)
		}
	})
}
