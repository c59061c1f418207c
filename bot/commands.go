package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/storage"
	"github.com/signoff-dev/signoff/workflow"
)

const (
	pendingPageSize = 10
	// maxPendingPage bounds how deep a page may reach: the list is read from
	// the start each time, and nobody pages through 500 waiting runs in Slack.
	maxPendingPage = 50
)

// commandReply is the JSON answer to a slash command.
type commandReply struct {
	ResponseType string        `json:"response_type"`
	Text         string        `json:"text"`
	Blocks       []slack.Block `json:"blocks,omitempty"`
}

// reply is an ephemeral answer: only the person who typed the command sees it.
func reply(text string, blocks ...slack.Block) Response {
	if len(blocks) == 0 {
		blocks = []slack.Block{bkSection(text)}
	}
	return Response{Body: &commandReply{ResponseType: slack.ResponseTypeEphemeral, Text: cutText(text, MaxSectionText), Blocks: blocks}}
}

func helpText(cmd string) string {
	c := mdEscape(cmd)
	return strings.Join([]string{
		"*" + c + "* lists and manages runs waiting for approval:",
		"• `" + c + " pending [page]`: runs waiting, oldest first",
		"• `" + c + " show RUN_ID`: one run in full",
		"• `" + c + " cancel RUN_ID reason…`: cancel a run before it executes",
		"• `" + c + " resolve RUN_ID happened|retry|abandon reason…`: after looking at the target, say what became of a run that needs attention (it happened; it did not, send it again; it did not, give up)",
		"• `" + c + " reassign RUN_ID @person`: ask one person to decide",
		"• `" + c + " extend RUN_ID 24h`: move the deadline (s, m, h or d)",
		"• `" + c + " delegate @person until YYYY-MM-DD [reason…]`: let them decide on your behalf until then",
		"• `" + c + " delegations`: the delegations from and to you",
		"• `" + c + " undelegate ID` (or `delegate revoke ID`): end a delegation you gave, were given or made",
		"• `" + c + " force RUN_ID reason…`: break-glass: approve at once where the rule lets your role force it (announced, reviewed)",
		"• `" + c + " ack RUN_ID [note…]`: acknowledge the review of a forced approval",
	}, "\n")
}

// command runs one slash command. Every answer, refusals included, is an
// ephemeral message; only a broken request is an error, and that was caught
// before.
func (s *Server) command(ctx context.Context, cmd *Command) Response {
	who := record.Person{ID: cmd.UserID, Name: cutText(cmd.UserName, 80)}
	log := s.log.With("user_id", cmd.UserID, "command", cutText(cmd.Command, 40))
	if !strings.EqualFold(cmd.Command, s.slash) {
		// The app's command and slack.command differ: say which is which
		// rather than answer under a name the help would not use.
		log.Warn("slack command of another name than slack.command", "slack_command", s.slash)
		return reply("This signoff answers " + mdCode(s.slash, 40) + " (its slack.command), not " + mdCode(cmd.Command, 40) +
			": give the app's slash command and slack.command the same name.")
	}
	args := strings.Fields(cmd.Text)
	if len(args) == 0 {
		return reply(helpText(s.slash))
	}
	sub := strings.ToLower(args[0])
	need := map[string]int{"show": 2, "cancel": 3, "reassign": 3, "extend": 3, "resolve": 4, "force": 3, "ack": 2}[sub]
	if len(args) < need {
		return reply("Not enough arguments.\n" + helpText(s.slash))
	}
	switch sub {
	case "pending":
		page := 1
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 || n > maxPendingPage {
				return reply(fmt.Sprintf("The page is a number from 1 to %d.", maxPendingPage))
			}
			page = n
		}
		return s.pending(ctx, who, page, log)
	case "show":
		return s.show(ctx, who, args[1], log)
	case "cancel":
		reason := unescapeSlack(restAfter(cmd.Text, 2))
		if _, err := s.eng.Cancel(ctx, args[1], who, reason); err != nil {
			return reply(s.commandRefusal(err, log))
		}
		log.Info("slack cancel recorded", "run_id", args[1])
		return reply("Cancelled run " + mdCode(args[1], 100) + ". Its approval message will say so.")
	case "resolve":
		return s.resolve(ctx, who, args[1], strings.ToLower(args[2]), unescapeSlack(restAfter(cmd.Text, 3)), log)
	case "reassign":
		to, ok := parseMention(args[2])
		if !ok {
			return reply("Mention the person to ask: `" + mdEscape(s.slash) + " reassign RUN_ID @person`.")
		}
		if _, err := s.eng.Reassign(ctx, args[1], who, to); err != nil {
			return reply(s.commandRefusal(err, log))
		}
		log.Info("slack reassign recorded", "run_id", args[1], "to", to.ID)
		return reply("Run " + mdCode(args[1], 100) + " is now assigned to " + mdMention(to.ID, "") + ".")
	case "extend":
		d, err := ParseExtension(args[2])
		if err != nil {
			return reply("Say how long, like `24h`, `90m` or `2d`: " + mdEscape(err.Error()) + ".")
		}
		run, err := s.eng.Extend(ctx, args[1], who, d)
		if err != nil {
			return reply(s.commandRefusal(err, log))
		}
		log.Info("slack extend recorded", "run_id", args[1], "by", d.String())
		return reply(fmt.Sprintf("The deadline of run %s is now %s (%s).", mdCode(args[1], 100), slackDate(run.Deadline), untilText(s.clock.Now(), run.Deadline)))
	case "delegate", "undelegate":
		return s.delegate(ctx, who, cmd.Text, log)
	case "delegations":
		return s.delegations(ctx, who, log)
	case "force":
		return s.force(ctx, who, args[1], unescapeSlack(restAfter(cmd.Text, 2)), log)
	case "ack":
		return s.ackReview(ctx, who, args[1], unescapeSlack(restAfter(cmd.Text, 2)), log)
	case "help":
		return reply(helpText(s.slash))
	}
	return reply("Unknown subcommand " + mdCode(args[0], 40) + ".\n" + helpText(s.slash))
}

// resolve records what who found of a run that needs attention. A receipt
// is given with signoff resolve or the API, not in a slash command.
func (s *Server) resolve(ctx context.Context, who record.Person, id, choice, reason string, log *slog.Logger) Response {
	c := record.Resolution(choice)
	if c != record.ResolveHappened && c != record.ResolveRetry && c != record.ResolveAbandon {
		return reply("Say what became of it: `" + mdEscape(s.slash) + " resolve RUN_ID happened|retry|abandon reason…` (" +
			"happened: it took place; retry: it did not, send it again under the same key; abandon: it did not, end the run as failed).")
	}
	run, err := s.eng.Resolve(ctx, workflow.ResolveInput{RunID: id, By: who, Choice: c, Reason: reason, Via: "slack"})
	if err != nil {
		return reply(s.commandRefusal(err, log))
	}
	log.Info("slack resolve recorded", "run_id", id, "choice", choice, "status", string(run.Status))
	return reply("Resolved run " + mdCode(id, 100) + ": " + mdEscape(c.Describe()) + ". It is now " + mdCode(string(run.Status), 40) + "; its approval message will say so.")
}

// mayRead says whether who may see runs: anyone holding a role. The engine
// checks cancel, reassign and extend itself; reading is checked here.
func (s *Server) mayRead(ctx context.Context, who record.Person, log *slog.Logger) string {
	_, ok, err := s.dir.RoleOf(ctx, who.ID)
	switch {
	case err != nil:
		log.Warn("role lookup failed", "err", err)
		return "signoff could not check your role with Slack just now. Try again in a minute."
	case !ok:
		return "You hold no signoff role, so you cannot see its runs."
	}
	return ""
}

func (s *Server) pending(ctx context.Context, who record.Person, page int, log *slog.Logger) Response {
	if msg := s.mayRead(ctx, who, log); msg != "" {
		return reply(msg)
	}
	runs, err := s.pendingViews(ctx, storage.RunFilter{
		Statuses: []record.Status{record.StatusWaitingApproval}, Limit: page*pendingPageSize + 1,
	}, (page-1)*pendingPageSize, log)
	if err != nil {
		log.Error("list pending runs", "err", err)
		return reply("signoff could not list the runs (an internal error). Try again.")
	}
	from := (page - 1) * pendingPageSize
	var later []slack.Block
	if page == 1 {
		// The scheduled runs come once, on the first page: approved, they
		// wait for no one.
		if later, err = s.scheduledBlocks(ctx, log); err != nil {
			log.Error("list scheduled runs", "err", err)
			return reply("signoff could not list the runs (an internal error). Try again.")
		}
	}
	if from >= len(runs) {
		if page == 1 && len(later) > 0 {
			return reply("Nothing is waiting for approval; some approved runs wait for their execution window.", later...)
		}
		if page == 1 {
			if rb := s.reviewBlocks(ctx, log); len(rb) > 0 {
				return reply("Nothing is waiting for approval; forced approvals wait for their review.", append([]slack.Block{bkSection("Nothing is waiting for approval.")}, rb...)...)
			}
			return reply("Nothing is waiting for approval.")
		}
		return reply(fmt.Sprintf("There is no page %d: fewer runs are waiting.", page))
	}
	more := len(runs) > page*pendingPageSize
	runs = runs[from:min(len(runs), page*pendingPageSize)]
	now := s.clock.Now()
	title := "Waiting for approval"
	if page > 1 || more {
		title += fmt.Sprintf(" (page %d)", page)
	}
	blocks := []slack.Block{slack.NewHeaderBlock(bkPlain(title))}
	for _, r := range runs {
		if r.read {
			r.v = workflow.RedactedView(r.v, s.eng.Action) // the summary may repeat a redact: field
		}
		blocks = append(blocks, bkSection(pendingLine(r, now)))
	}
	if more {
		blocks = append(blocks, slack.NewContextBlock("", bkMrkdwn(fmt.Sprintf("More: `%s pending %d`", mdEscape(s.slash), page+1))))
	}
	blocks = append(blocks, later...)
	if page == 1 {
		blocks = append(blocks, s.reviewBlocks(ctx, log)...)
	}
	return reply(fmt.Sprintf("%s: %d runs", title, len(runs)), blocks...)
}

// viewLister is an engine that reads a page of runs with what each is
// about in one query.
type viewLister interface {
	ListViews(ctx context.Context, f storage.RunFilter) ([]*workflow.RunView, error)
}

var _ viewLister = (*workflow.Engine)(nil)

// pendingRun is a waiting run as the pending list shows it; read is false
// when what it is about could not be read (the run row only).
type pendingRun struct {
	v    *workflow.RunView
	read bool
}

// pendingViews lists runs with their actions, summary and requester: in one
// query when the engine can, else by reading each run from index from on
// (those before are another page's).
func (s *Server) pendingViews(ctx context.Context, f storage.RunFilter, from int, log *slog.Logger) ([]pendingRun, error) {
	if lv, ok := s.eng.(viewLister); ok {
		views, err := lv.ListViews(ctx, f)
		if err != nil {
			return nil, err
		}
		out := make([]pendingRun, len(views))
		for i, v := range views {
			out[i] = pendingRun{v, true}
		}
		return out, nil
	}
	runs, err := s.eng.List(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]pendingRun, len(runs))
	for i, r := range runs {
		var (
			v   *workflow.RunView
			err error
		)
		if i >= from {
			v, err = s.eng.Get(ctx, r.ID)
		}
		read := i >= from && err == nil
		if i >= from && !read {
			log.Warn("read pending run", "run_id", r.ID, "err", err)
		}
		if !read {
			v = &workflow.RunView{ID: r.ID, Requester: record.Person{ID: r.RequesterID}, CreatedAt: r.CreatedAt}
		}
		// The deadline is the run row's, as the one-query list has it.
		v.Deadline = nil
		if !r.Deadline.IsZero() {
			d := r.Deadline
			v.Deadline = &d
		}
		out[i] = pendingRun{v, read}
	}
	return out, nil
}

// pendingLine is one waiting run: id, actions, requester, age and deadline.
func pendingLine(p pendingRun, now time.Time) string {
	v := p.v
	head := "*" + mdCode(v.ID, 100) + "*"
	deadline := ""
	if v.Deadline != nil && !v.Deadline.IsZero() {
		deadline = " · deadline " + slackDate(*v.Deadline) + " (" + untilText(now, *v.Deadline) + ")"
	}
	if !p.read {
		return head + "\nasked by " + mdMention(v.Requester.ID, "") + " · " + agoText(now, v.CreatedAt) + deadline
	}
	line := head + " " + mdEscape(cutText(actionNames(v.Actions), 300))
	if v.Summary != "" {
		// The requester's words, literally: a code span reads no mrkdwn.
		line += "\nsummary " + mdCode(v.Summary, 200)
	}
	return line + "\nasked by " + personText(v.Requester) + " · " + agoText(now, v.CreatedAt) + deadline
}

func (s *Server) show(ctx context.Context, who record.Person, id string, log *slog.Logger) Response {
	if msg := s.mayRead(ctx, who, log); msg != "" {
		return reply(msg)
	}
	v, err := s.eng.Get(ctx, id)
	if err != nil {
		return reply(s.commandRefusal(err, log))
	}
	rc := RenderContext{Roles: s.eng.Roles(), Redact: Redactor(s.eng), Now: s.clock.Now(), UserGroups: s.groups, Command: s.slash, ConsoleURL: s.console}
	// No buttons: an ephemeral copy cannot be rewritten after a decision, so
	// the posted message stays the one place to decide.
	return reply(FallbackText(v), renderRun(v, rc, false)...)
}

// commandRefusal is what a person is told when the engine refused a command.
func (s *Server) commandRefusal(err error, log *slog.Logger) string {
	var r *record.RefusedError
	switch {
	case errors.As(err, &r):
		log.Info("slack command refused", "code", r.Code, "reason", r.Msg)
		if r.Code == record.CodeUnknownRun {
			return "Nothing changed: there is no run " + mdCode(r.RunID, 100) + "."
		}
		return "Nothing changed: " + mdEscape(r.Msg) + "."
	case errors.Is(err, ErrRoleLookup):
		log.Warn("slack command refused: role lookup failed", "err", err)
		return "Nothing changed: signoff could not check roles with Slack just now. Try again in a minute."
	}
	log.Error("slack command failed", "err", err)
	return "Nothing changed: an internal error. Try again."
}

var (
	mentionArg = regexp.MustCompile(`^<@([UW][A-Z0-9]{2,20})(?:\|([^>]{0,80}))?>$`)
	durationD  = regexp.MustCompile(`^(\d{1,3})d(.*)$`)
)

// parseMention reads a person from "<@U123|name>" (what Slack sends for a
// mention when the command escapes them), "<@U123>" or a bare user id.
func parseMention(s string) (record.Person, bool) {
	if m := mentionArg.FindStringSubmatch(s); m != nil {
		return record.Person{ID: m[1], Name: m[2]}, true
	}
	if slackUserID.MatchString(s) {
		return record.Person{ID: s}, true
	}
	return record.Person{}, false
}

// ParseExtension reads a duration in Go's form, with days too: 24h, 90m, 2d,
// 1d12h. The CLI reads its extend argument with it too.
func ParseExtension(s string) (time.Duration, error) {
	var d time.Duration
	if m := durationD.FindStringSubmatch(s); m != nil {
		days, _ := strconv.Atoi(m[1])
		d = time.Duration(days) * 24 * time.Hour
		if s = m[2]; s == "" {
			return d, nil
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration: %q", cutText(s, 40))
	}
	return d + rest, nil
}

// restAfter is text after its first n words, with its own spacing kept.
func restAfter(text string, n int) string {
	rest := strings.TrimLeftFunc(text, unicode.IsSpace)
	for range n {
		i := strings.IndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			return ""
		}
		rest = strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
	}
	return strings.TrimSpace(rest)
}

// unescapeSlack undoes the three escapes Slack applies to typed text.
func unescapeSlack(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}
