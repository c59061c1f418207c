package app

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/config"
	"github.com/signoff-dev/signoff/internal/stdwebhook"
	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/show"
	"github.com/signoff-dev/signoff/workflow"
)

// configCmd is `signoff config check [FILE]`: what a config says, checked as
// every other command checks it, without opening any store.
func (c *cli) configCmd() *cobra.Command {
	cfgCmd := &cobra.Command{Use: "config", Short: "Check a config and show what it says"}
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Check a config (default: the one in use) and print its roles, rules and actions; exit 2 if it is refused",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Sprintf("accepts at most 1 arg(s), received %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o := c.opts
			if len(args) == 1 {
				o.config = args[0]
			}
			// The summary names the config; warnings are listed in it, not on
			// stderr. Secrets are not needed to read it: which are not set
			// here is listed too.
			o.quietBuiltin, o.readOnly = true, true
			cfg, err := loadConfig(o, io.Discard)
			if err != nil {
				return err
			}
			renderConfig(c.out, cfg, o.getenv)
			if missing := cfg.Slack.Missing(); len(missing) > 0 {
				// serve would refuse it: the check says so now, not at the deploy.
				return cfg.Errorf("slack", "set up in part, so serve would start nothing; missing: %s (or remove the slack: section to serve without Slack)", strings.Join(missing, ", "))
			}
			fmt.Fprintln(c.out, "\nok")
			return nil
		},
	}
	cfgCmd.AddCommand(check)
	return cfgCmd
}

// policyCmd is `signoff policy explain PROPOSAL`.
func (c *cli) policyCmd() *cobra.Command {
	pol := &cobra.Command{Use: "policy", Short: "What the policy decides"}
	explain := &cobra.Command{
		Use:   "explain FILE|-",
		Short: "Say which rule each action of a proposal hits, its risk, who may approve and by when; writes nothing",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := c.readProposal(args[0])
			if err != nil {
				return err
			}
			// It calls no executor, so it needs none of their secrets.
			o := c.opts
			o.readOnly = true
			cfg, err := loadConfig(o, c.errOut)
			if err != nil {
				return err
			}
			// A nil shop: the actions' schemas and names, no executor is called.
			actions, _, err := buildActions(cfg, nil, c.opts.getenv, true, privateFiles(c.opts))
			if err != nil {
				return err
			}
			ex, err := workflow.Explain(c.ctx, workflow.Config{
				Policy: cfg.Policy, Roles: cfg.Roles, Actions: actions, AllowUnknownRequesters: cfg.Requesters.AllowUnknown,
			}, p)
			var refusal *record.RefusedError
			switch {
			case errors.As(err, &refusal):
				fmt.Fprintf(c.out, "refused: %s\nsubmit would refuse this proposal and write nothing.\n", refusal.Msg)
				c.code = exitRefused
				return nil
			case err != nil:
				fmt.Fprintf(c.out, "policy could not decide: %v\nsubmit would hand the run to a person (needs attention).\n", err)
				c.code = exitAttention
				return nil
			}
			renderExplanation(c.out, cfg, p, ex, redactor(func(name string) (*workflow.ActionSpec, bool) {
				spec, ok := actions[name]
				return spec, ok
			}), time.Now())
			return nil
		},
	}
	pol.AddCommand(explain)
	return pol
}

// readProposal reads and parses a proposal from a file or, for "-", stdin,
// with the rules every edge shares (workflow.ReadProposal).
func (c *cli) readProposal(name string) (*workflow.Proposal, error) {
	in := c.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usageError{fmt.Sprintf("read proposal: %v", err)}
		}
		defer f.Close()
		in = f
	}
	p, err := workflow.ReadProposal(in)
	if err != nil {
		// Name the file: the parser's offsets mean little without it.
		if name == "-" {
			name = "stdin"
		}
		if !record.IsRefused(err) {
			return nil, usageError{fmt.Sprintf("%s: %v", name, err)}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// renderConfig prints what a config says, in the order it decides things;
// the caller says whether it is ok.
func renderConfig(w io.Writer, cfg *config.Config, getenv func(string) string) {
	fmt.Fprintf(w, "config: %s\n", cfg.Source)
	fmt.Fprintf(w, "policy revision: %s\n", cfg.Policy.Revision())

	fmt.Fprintln(w, "\nroles (lowest first; a higher role may approve what a lower one may):")
	names := cfg.Roles.Names()
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, role := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, role, membersText(cfg, role))
	}

	fmt.Fprintln(w, "\nrequesters:")
	if cfg.Requesters.AllowUnknown {
		fmt.Fprintln(w, "  anyone may propose (requesters.allow_unknown); requester.role is \"\" for someone in no role")
	} else {
		fmt.Fprintln(w, "  members of a role only; anyone else is refused")
	}

	fmt.Fprintln(w, "\nrules (first match wins):")
	for i, r := range cfg.Policy.Rules() {
		fmt.Fprintf(w, "  %d. %s  risk %s\n", i+1, r.Name, r.Risk)
		fmt.Fprintf(w, "     when %s\n", r.When)
		fmt.Fprintf(w, "     %s\n", approvalText(cfg, r.Approval))
	}

	fmt.Fprintln(w, "\nactions:")
	actions := slices.Sorted(maps.Keys(cfg.Actions))
	width = 0
	for _, name := range actions {
		width = max(width, len(name))
	}
	for _, name := range actions {
		ac := cfg.Actions[name]
		line := fmt.Sprintf("  %-*s  executor %s", width, name, ac.Executor)
		if where := executorTarget(ac); where != "" {
			line += " " + where
		}
		if env, ok := ac.ExecutorFields["secret_env"].(string); ok && env != "" {
			line += ", signed with the secret in " + term(env)
			// Said, not refused: the commands that read work without it.
			if v := getenvOr(getenv)(env); strings.TrimSpace(v) == "" {
				line += " (not set here: only the commands that only read work without it)"
			} else if _, err := stdwebhook.ParseSecrets(v); err != nil {
				line += fmt.Sprintf(" (set here, but %v)", err)
			}
		}
		if len(ac.Redact) > 0 {
			line += "; hidden from approvers: " + strings.Join(ac.Redact, ", ")
		}
		fmt.Fprintln(w, line)
		if ac.Description != "" {
			fmt.Fprintf(w, "  %-*s  %s\n", width, "", term(ac.Description))
		}
	}

	// The agent API: who may call it, never with a token's hash.
	fmt.Fprintln(w, "\napi tokens:")
	if len(cfg.API.Tokens) == 0 {
		fmt.Fprintln(w, "  none: the agent API (/v1) accepts no request")
	} else {
		width = 0
		for _, tk := range cfg.API.Tokens {
			width = max(width, len(tk.ID))
		}
		for _, tk := range cfg.API.Tokens {
			fmt.Fprintf(w, "  %-*s  requester %s, scopes %s\n", width, term(tk.ID), term(tk.Requester), strings.Join(tk.Scopes, ", "))
		}
		fmt.Fprintf(w, "  each token: %g requests a second, bursts of %d\n", cfg.API.Rate, cfg.API.Burst)
	}

	fmt.Fprintln(w, "\ncallbacks:")
	if len(cfg.API.CallbackPrefixes) == 0 {
		fmt.Fprintln(w, "  none allowed (no api.callbacks.allow): a proposal with a callback_url is refused")
	} else {
		for _, p := range cfg.API.CallbackPrefixes {
			fmt.Fprintf(w, "  allowed under %s\n", term(p))
		}
		fmt.Fprintf(w, "  signed with the secret in $%s\n", cfg.API.CallbackSecretEnv)
	}

	fmt.Fprintln(w, "\nslack:")
	switch sc := cfg.Slack; {
	case !sc.Given:
		fmt.Fprintln(w, "  "+slackOff)
	case len(sc.Missing()) > 0:
		fmt.Fprintf(w, "  set up in part: missing %s\n", strings.Join(sc.Missing(), ", "))
	default:
		org := "team " + sc.TeamID
		switch {
		case sc.TeamID == "":
			org = "enterprise " + sc.EnterpriseID
		case sc.EnterpriseID != "":
			org += ", enterprise " + sc.EnterpriseID
		}
		fmt.Fprintf(w, "  on: channel %s, app %s, %s, slash command %s\n", sc.Channel, sc.AppID, org, slashCommand(sc))
		fmt.Fprintln(w, "  serve also needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (SLACK_APP_TOKEN with --socket-mode) in its environment")
	}

	if len(cfg.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings (%d):\n", len(cfg.Warnings))
		for _, warn := range cfg.Warnings {
			fmt.Fprintf(w, "  %s\n", warn)
		}
	}
}

// membersText lists a role's own members and its Slack user group.
func membersText(cfg *config.Config, role string) string {
	var own []string
	higher := cfg.Roles.Members(role)
	for _, m := range higher {
		if r, _ := cfg.Roles.RoleOf(m); r == role {
			own = append(own, m)
		}
	}
	text := strings.Join(own, ", ")
	if text == "" {
		text = "(nobody listed)"
	}
	if g, ok := cfg.Slack.UserGroups[role]; ok {
		text += " + Slack user group " + g
	}
	return text
}

// approvalText says who must approve under a rule, naming the people.
func approvalText(cfg *config.Config, a *record.ApprovalSpec) string {
	if a == nil {
		return "runs without approval"
	}
	people := cfg.Roles.Members(a.Role)
	var groups []string
	for _, role := range cfg.Roles.Names() {
		if g, ok := cfg.Slack.UserGroups[role]; ok && cfg.Roles.AtLeast(role, a.Role) {
			groups = append(groups, g)
		}
	}
	who := strings.Join(people, ", ")
	if len(groups) > 0 {
		who += " + Slack user group " + strings.Join(groups, ", ")
	}
	text := fmt.Sprintf("approval: %d of %s or above (%s) within %s", a.Count, a.Role, who, show.Duration(a.Expires.Duration()))
	if a.Requirement != nil {
		// Each leaf names its role; a higher role fills a lower one's place.
		text = fmt.Sprintf("approval: %s, within %s", policy.Sentence(a.Requirement), show.Duration(a.Expires.Duration()))
	}
	if !a.SelfApproval {
		text += ", not the requester"
	}
	if a.Edit {
		text += "; approvers may edit the arguments"
	}
	return text
}

// renderExplanation prints what policy decides for a proposal.
func renderExplanation(w io.Writer, cfg *config.Config, p *workflow.Proposal, ex *workflow.Explanation, shown argsShown, now time.Time) {
	fmt.Fprintf(w, "config: %s (policy revision %s)\n", cfg.Source, cfg.Policy.Revision())
	role := ex.RequesterRole
	if role == "" {
		role = "no role"
	}
	fmt.Fprintf(w, "requester: %s (%s)\n\n", term(p.Requester.ID), role)
	for i, out := range ex.Actions {
		a := p.Actions[i]
		fmt.Fprintf(w, "%d. %s %s\n", i+1, term(a.Name), oneLine(argsText(shown(a.Name, a.Args))))
		fmt.Fprintf(w, "   rule %s, risk %s; %s\n", out.Rule, out.Risk, approvalText(cfg, out.Approval))
	}
	g := ex.Gate
	fmt.Fprintf(w, "\nthe proposal: risk %s, rule %s\n", g.Risk, g.Rule)
	if g.Approval == nil {
		fmt.Fprintln(w, "runs without approval once the checks pass")
		return
	}
	fmt.Fprintf(w, "waits for %s\n", approvalText(cfg, g.Approval))
	fmt.Fprintf(w, "deadline: %s after submit (if submitted now: %s)\n", show.Duration(g.Approval.Expires.Duration()), now.Add(g.Approval.Expires.Duration()).UTC().Format("2006-01-02 15:04 MST"))
}

// oneLine shortens shown arguments (argsText) for a line of text.
func oneLine(s string) string {
	if r := []rune(s); len(r) > 100 {
		s = string(r[:97]) + "..."
	}
	return s
}
