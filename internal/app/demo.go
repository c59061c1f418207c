package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/internal/app/demostory"
	"github.com/signoff-dev/signoff/workflow"
)

// demoCmd tells the whole story from nothing, in a temporary folder: three
// tickets, one that waits for a team lead, its approval and exactly one refund,
// a rejection, and two real crashes (the process kills itself) with their recovery.
func (c *cli) demoCmd() *cobra.Command {
	var keep, ui bool
	var uiAddr string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Tell the story on a fresh practice shop, in a temporary folder",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "signoff-demo-")
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			d := &demoStory{cli: c, dir: dir, out: c.out}
			if err := demostory.Tell(c.ctx, d, dir, c.out); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if ui {
				return d.serveConsole(c.ctx, uiAddr)
			}
			if keep {
				fmt.Fprintf(c.out, "\nThe files are kept in %s (try: %s)\n", dir, shellLine("signoff", "--db", filepath.Join(dir, "signoff.db"), "--shop", filepath.Join(dir, "shop.db"), "runs"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary folder to look around afterwards")
	cmd.Flags().BoolVar(&ui, "ui", false, "then serve the demo's runs in the web console, with a local login, until interrupted")
	cmd.Flags().StringVar(&uiAddr, "ui-addr", "127.0.0.1:8080", "where --ui serves the console (loopback only: its login lets anyone be anyone)")
	return cmd
}

// demoStory is signoff as the demo's story runs it (demostory.Program):
// each command in process, or in a child that crashes, against the files in
// dir, printed on out.
type demoStory struct {
	cli *cli
	dir string
	out io.Writer
}

func (d *demoStory) opts() options {
	cfg := d.cli.opts.config
	if cfg != "" {
		// The crashing children run in the demo's folder.
		if abs, err := filepath.Abs(cfg); err == nil {
			cfg = abs
		}
	}
	return options{db: filepath.Join(d.dir, "signoff.db"), shop: filepath.Join(d.dir, "shop.db"), config: cfg, quietBuiltin: true}
}

func (d *demoStory) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

// Signoff runs one command of this program in-process against the demo's files,
// prints what it printed (indented) and returns its exit code and output.
func (d *demoStory) Signoff(ctx context.Context, args ...string) (int, string) {
	o := d.opts()
	full := append([]string{"--db", o.db, "--shop", o.shop}, args...)
	if o.config != "" {
		full = append([]string{"--config", o.config}, full...)
	}
	var out bytes.Buffer
	c := &cli{ctx: ctx, getenv: func(string) string { return "" }, stdin: strings.NewReader(""), out: &out, errOut: &out,
		opts: options{quietBuiltin: true}}
	code := c.execute(full)
	d.say("$ %s", shellLine(append([]string{"signoff"}, args...)...))
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		d.say("    %s", line)
	}
	d.say("    (exit %d)", code)
	return code, out.String()
}

// Crash runs one command in a child process that kills itself at failpoint.
func (d *demoStory) Crash(ctx context.Context, failpoint string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	o := d.opts()
	full := append([]string{"--db", o.db, "--shop", o.shop}, args...)
	if o.config != "" {
		full = append([]string{"--config", o.config}, full...)
	}
	cmd := exec.CommandContext(ctx, self, full...)
	cmd.Env = append(os.Environ(), "SIGNOFF_FAILPOINT="+failpoint)
	// In the demo's folder, where no signoff.yaml can stand in for the built-in config.
	cmd.Dir = d.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	d.say("$ SIGNOFF_FAILPOINT=%s %s", shellQuote(failpoint), shellLine(append([]string{"signoff"}, args...)...))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			d.say("    (the process was killed at %s)", failpoint)
			return nil
		}
	}
	return fmt.Errorf("the process should have died at %s, but: %v\n%s", failpoint, err, out.String())
}

// Engine opens the app on the demo's files, for its engine.
func (d *demoStory) Engine(ctx context.Context) (*workflow.Engine, io.Closer, error) {
	a, err := openApp(ctx, d.opts(), func(string) string { return "" }, io.Discard, nil)
	if err != nil {
		return nil, nil, err
	}
	return a.engine, a, nil
}
