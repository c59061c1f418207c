package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the reconnects to an upstream whose connection was lost: the
// first is tried on the next call, each failed one doubles the wait before
// the next, up to MaxReconnectWait, so that a dead upstream is not hammered
// and a calling agent is answered at once meanwhile.
const (
	MinReconnectWait = time.Second
	MaxReconnectWait = 30 * time.Second
	// reconnectTimeout bounds one reconnect: the handshake of a program
	// started again, or of an endpoint back up.
	reconnectTimeout = 10 * time.Second
)

// upstreamConn is the connection to one upstream, reconnected on demand.
type upstreamConn struct {
	name   string
	client *mcp.Client
	dial   func() mcp.Transport // nil: no reconnect
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession // nil while down
	closed  bool
	lostBy  error         // why it is down
	retryAt time.Time     // no reconnect before
	wait    time.Duration // the wait after the last failed reconnect
	// unsent are the operation keys whose last attempt certainly never
	// reached the upstream (it was down): Lookup may say they did not
	// happen, once each.
	unsent map[string]bool
}

func newConn(up Upstream, client *mcp.Client, now func() time.Time, log *slog.Logger) *upstreamConn {
	return &upstreamConn{name: up.Name, client: client, dial: up.Dial, now: now, log: log, unsent: map[string]bool{}}
}

// attach makes cs the connection, and watches it end.
func (c *upstreamConn) attach(cs *mcp.ClientSession) {
	c.session, c.lostBy, c.wait = cs, nil, 0
	go func() {
		err := cs.Wait()
		if err == nil {
			err = errors.New("the connection ended")
		}
		c.lost(cs, err)
	}()
}

// lost marks cs, if it is still the connection, as gone: the next call
// reconnects.
func (c *upstreamConn) lost(cs *mcp.ClientSession, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != cs {
		return
	}
	c.session, c.lostBy, c.retryAt = nil, why, c.now()
	if !c.closed {
		c.log.Warn("mcp upstream connection lost", "upstream", c.name, "err", why)
	}
	go cs.Close()
}

// DownError says that an upstream cannot be reached now: nothing was sent
// to it.
type DownError struct {
	Upstream string
	Err      error
	RetryIn  time.Duration // until the next reconnect is tried; 0: on the next call
}

func (e *DownError) Error() string {
	msg := fmt.Sprintf("the upstream %s cannot be reached: %v", e.Upstream, e.Err)
	if e.RetryIn > 0 {
		msg += fmt.Sprintf("; signoff tries to reconnect in %s", e.RetryIn.Round(time.Second))
	}
	return msg
}

func (e *DownError) Unwrap() error { return e.Err }

// get returns the connection, reconnecting when it was lost and its wait
// has passed. A DownError means nothing was sent.
func (c *upstreamConn) get(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.session != nil:
		return c.session, nil
	case c.closed:
		return nil, &DownError{Upstream: c.name, Err: errors.New("the gateway is shutting down")}
	case c.dial == nil:
		return nil, &DownError{Upstream: c.name, Err: fmt.Errorf("%v, and it has no way to reconnect", c.lostBy)}
	}
	if now := c.now(); now.Before(c.retryAt) {
		return nil, &DownError{Upstream: c.name, Err: c.lostBy, RetryIn: c.retryAt.Sub(now)}
	}
	// Held across the reconnect: calls that come meanwhile wait for it
	// rather than start programs of their own.
	rctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	cs, err := c.client.Connect(rctx, c.dial(), nil)
	if err != nil {
		c.wait = min(max(2*c.wait, MinReconnectWait), MaxReconnectWait)
		c.lostBy, c.retryAt = fmt.Errorf("reconnect: %w", err), c.now().Add(c.wait)
		c.log.Warn("mcp upstream reconnect failed", "upstream", c.name, "retry_in", c.wait, "err", err)
		return nil, &DownError{Upstream: c.name, Err: c.lostBy, RetryIn: c.wait}
	}
	c.log.Info("mcp upstream reconnected", "upstream", c.name)
	c.attach(cs)
	return cs, nil
}

// call calls the tool on the connection. A failure other than the
// upstream's own JSON-RPC error means the connection is in doubt: it is
// dropped, so that the next call reconnects.
func (c *upstreamConn) call(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, p)
	var wire *jsonrpc.Error
	if err != nil && !errors.As(err, &wire) {
		c.lost(cs, err)
	}
	return res, err
}

// notSent says whether err proves that the call never left: the upstream
// was down, or its endpoint refused the connection.
func notSent(err error) bool {
	var down *DownError
	var op *net.OpError
	return errors.As(err, &down) || (errors.As(err, &op) && op.Op == "dial")
}

// markUnsent and takeUnsent remember, in this process, the keys whose last
// attempt certainly never reached the upstream.
func (c *upstreamConn) markUnsent(key string) {
	c.mu.Lock()
	c.unsent[key] = true
	c.mu.Unlock()
}

func (c *upstreamConn) takeUnsent(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.unsent[key]
	delete(c.unsent, key)
	return ok
}

func (c *upstreamConn) close() error {
	c.mu.Lock()
	cs := c.session
	c.closed, c.session = true, nil
	c.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}

// annotationsOf are the tool's annotations, bounded as served, as JSON.
func annotationsOf(t *mcp.Tool) json.RawMessage {
	if t.Annotations == nil {
		return nil
	}
	a := *t.Annotations
	a.Title = text(a.Title, maxTitle)
	b, err := json.Marshal(a)
	if err != nil {
		return nil
	}
	return b
}
