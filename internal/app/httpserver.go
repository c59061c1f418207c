package app

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// httpServer serves h with serve's timeouts; rt bounds reading one request
// (0: unbounded). Its shutdown closes at once every connection on which no
// request has begun.
func httpServer(h http.Handler, rt time.Duration) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: rt, IdleTimeout: 2 * time.Minute}
	var spare spareConns
	srv.ConnState = spare.track
	srv.RegisterOnShutdown(spare.close)
	return srv
}

// spareConns are the connections accepted that have not yet read a request:
// a browser's preconnect, a proxy's dial that lost a race. net/http's
// shutdown counts such a connection as busy for its first five seconds, so
// one would hold an interrupted process that long, and fail a shutdown
// whose grace is no longer. Closing one loses nothing: no request on it
// has begun.
type spareConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// track is the server's ConnState hook. A connection the server accepted
// as its shutdown began (the hook that closes the spare ones runs beside
// the accept loop's last turn) is closed as it is told of it.
func (s *spareConns) track(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state != http.StateNew {
		delete(s.conns, c)
		return
	}
	if s.closed {
		c.Close()
		return
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
}

// close closes the spare connections; the shutdown runs it once the
// listeners are closed, so that no new one is accepted after it.
func (s *spareConns) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	clear(s.conns)
}
