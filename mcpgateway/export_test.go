package mcpgateway

import "time"

// WaitLost returns once the connection to the upstream name has ended and
// the gateway has seen it end.
func WaitLost(u *Upstreams, name string) {
	for _, c := range u.conns {
		if c.name != name {
			continue
		}
		c.mu.Lock()
		cs := c.session
		c.mu.Unlock()
		if cs != nil {
			err := cs.Wait()
			c.lost(cs, err)
		}
	}
}

// SetNow sets the clock the reconnects' backoff is measured on.
func SetNow(u *Upstreams, now func() time.Time) {
	for _, c := range u.conns {
		c.now = now
	}
}
