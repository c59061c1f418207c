package app

import (
	"net"
	"net/http"
	"testing"
)

// A connection on which no request has begun is closed by the shutdown,
// whether the server was told of it before the shutdown's hook ran or
// after (accepted in the accept loop's last turn); one carrying a request
// is left to finish it.
func TestTheShutdownClosesSpareConnectionsAcceptedAroundIt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		steps     func(s *spareConns, c net.Conn)
		wantClose bool
	}{
		{"accepted before", func(s *spareConns, c net.Conn) { s.track(c, http.StateNew); s.close() }, true},
		{"accepted as it began", func(s *spareConns, c net.Conn) { s.close(); s.track(c, http.StateNew) }, true},
		{"carrying a request", func(s *spareConns, c net.Conn) {
			s.track(c, http.StateNew)
			s.track(c, http.StateActive)
			s.close()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, client := net.Pipe()
			defer client.Close()
			defer server.Close()
			var s spareConns
			tc.steps(&s, server)
			// A write to a closed pipe end fails at once; to an open one it
			// blocks until read, so the read side is drained first.
			go func() { _, _ = client.Read(make([]byte, 1)) }()
			_, err := server.Write([]byte("x"))
			if closed := err != nil; closed != tc.wantClose {
				t.Errorf("closed = %v (write: %v), want %v", closed, err, tc.wantClose)
			}
		})
	}
}
