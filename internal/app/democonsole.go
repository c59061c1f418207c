package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/config"
)

// serveConsole serves the demo's store with the web console and its local
// login on addr (loopback), until ctx ends: a look at the console without
// an identity provider or a config of one's own. The planter ticket is
// proposed once more first, so that a run waits for a decision there.
func (d *demoStory) serveConsole(ctx context.Context, addr string) error {
	if code, out := d.quiet(ctx, "run", "T-90103"); code != exitWaiting {
		return fmt.Errorf("demo: the planter ticket should wait for approval, exit %d:\n%s", code, out)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("demo: make the console's session key: %w", err)
	}
	key := hex.EncodeToString(raw[:]) // this process's only: sessions end with it
	getenv := func(k string) string {
		if k == uiKeyEnv {
			return key
		}
		return ""
	}
	a, err := openApp(ctx, d.opts(), getenv, io.Discard, nil)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer a.Close()
	a.cfg.UI = config.UIConfig{Given: true, LocalLogin: true}
	s, err := startServer(ctx, a, serveOptions{addr: addr, adminAddr: "", poll: time.Second})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(d.out, "\nThe web console serves the demo's runs: open http://%s%s/ and log in as U0LEAD0001 (a team lead)\n", s.addr, consolePrefix)
	fmt.Fprintf(d.out, "to approve or reject the planter run that waits. Interrupt (Ctrl-C) to stop.\n")
	<-ctx.Done()
	return s.stop()
}

// quiet runs one command of this program in-process against the demo's
// files, printing nothing.
func (d *demoStory) quiet(ctx context.Context, args ...string) (int, string) {
	o := d.opts()
	full := append([]string{"--db", o.db, "--shop", o.shop}, args...)
	if o.config != "" {
		full = append([]string{"--config", o.config}, full...)
	}
	var out strings.Builder
	c := &cli{ctx: ctx, getenv: func(string) string { return "" }, stdin: strings.NewReader(""), out: &out, errOut: &out,
		opts: options{quietBuiltin: true}}
	return c.execute(full), out.String()
}
