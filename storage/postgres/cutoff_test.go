package postgres

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// replyCutter is a TCP proxy in front of a PostgreSQL server. Once armed, it
// lets the server answer the next pipeline in full, up to ReadyForQuery, and
// then closes the client's side without passing any of the answer on: the
// server did the work, and the client never hears of it.
type replyCutter struct {
	// dsn reaches the server through the proxy.
	dsn   string
	armed atomic.Bool
	cut   chan struct{}
}

func newReplyCutter(t *testing.T, dsn string) *replyCutter {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	p := &replyCutter{dsn: u.String(), cut: make(chan struct{})}
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", server)
			if err != nil {
				client.Close()
				continue
			}
			wg.Go(func() {
				io.Copy(srv, client)
				srv.Close()
			})
			wg.Go(func() {
				defer client.Close()
				defer srv.Close()
				p.relay(client, srv)
			})
		}
	})
	return p
}

// arm makes the proxy cut off the server's next answer. The client must
// have read every answer before it arms.
func (p *replyCutter) arm() { p.armed.Store(true) }

// relay passes the server's messages on one at a time (a type byte, then a
// length that counts itself), until an armed proxy meets ReadyForQuery.
func (p *replyCutter) relay(client io.Writer, srv io.Reader) {
	r := bufio.NewReader(srv)
	head := make([]byte, 5)
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if p.armed.Load() {
			// The answer to what the client sent after arm: none of it is
			// passed on, and it ends once the server is ready again, having
			// run the whole pipeline.
			if head[0] == 'Z' {
				p.armed.Store(false)
				close(p.cut)
				return
			}
			continue
		}
		if _, err := client.Write(append(head, body...)); err != nil {
			return
		}
	}
}

// When the connection breaks after the server has run a COMMIT that carried
// a deferred audit event, nobody can tell whether the transaction committed:
// Update says the outcome is unknown, never that it rolled back (here it
// committed), and the store goes on with a new connection.
func TestACommitCutOffFromItsAnswerIsNotCalledARollback(t *testing.T) {
	t.Parallel()
	dsn := migrated(t)
	p := newReplyCutter(t, dsn)
	s := openStore(t, p.dsn+"&pool_max_conns=1")
	submit := func(id string, cut bool) error {
		return s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
			if err := tx.InsertRun(ctx, &record.Run{ID: id, Status: record.StatusRunning}); err != nil {
				return err
			}
			if err := tx.AppendAudit(ctx, &record.AuditEvent{RunID: id, Action: "submitted"}, nil); err != nil {
				return err
			}
			if cut {
				p.arm() // the event and COMMIT go out next, in one pipeline
			}
			return nil
		})
	}
	// Once, so that the connection has its statements prepared: pgx prepares
	// a new one in a round trip of its own, which the proxy would cut instead.
	if err := submit("run-warm", false); err != nil {
		t.Fatal(err)
	}
	err := submit("run-a", true)
	t.Logf("Update = %v", err)
	select {
	case <-p.cut:
	default:
		t.Fatalf("the proxy cut nothing off; Update = %v", err)
	}
	if err == nil || strings.Contains(err.Error(), "rolled back") || !strings.Contains(err.Error(), "outcome is unknown") {
		t.Errorf("Update = %v, want an error saying the outcome is unknown", err)
	}
	direct := openStore(t, dsn)
	err = direct.View(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		if _, err := tx.Run(ctx, "run-a"); err != nil {
			t.Errorf("run-a: %v; the server committed it", err)
		}
		evs, err := tx.AuditEvents(ctx, storage.AuditFilter{RunID: "run-a"})
		if err == nil && len(evs) != 1 {
			t.Errorf("%d audit events of run-a, want the one that went with COMMIT", len(evs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(ctx context.Context, tx storage.Tx) error {
		return tx.InsertRun(ctx, &record.Run{ID: "run-b", Status: record.StatusRunning})
	}); err != nil {
		t.Errorf("the next Update, on a new connection: %v", err)
	}
}
