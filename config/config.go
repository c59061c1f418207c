// Package config reads signoff's configuration: one YAML file that names the
// roles (lowest first), the policy rules (first match wins) and the actions, and
// optionally where Slack approvals go. Secrets never live in the file; they come
// from the environment (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET).
//
// A config is checked completely before anything starts: unknown fields,
// duplicate keys, conditions that do not compile, roles that do not exist. The
// error names the file, the line and the field, for example
//
//	signoff.yaml:9: policy.rules[0].when: ERROR: <input>:1:1: undeclared reference to 'actoin'
//
// Beyond the YAML, the rules are checked against the rest: a condition may
// read only the declared fields, name only actions the config has, and ask for
// no more approvers than the roles list. What is doubtful but workable (a
// quorum resting on a Slack user group, no catch-all rule) is a Warning.
//
// Without a file, the built-in demo config (default.yaml) is used.
package config

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	// The time zones of slack.digests are known wherever the program runs,
	// a static image without /usr/share/zoneinfo included: Go's copy is used
	// when the system has none.
	_ "time/tzdata"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// DefaultSource is the Source of the built-in config.
const DefaultSource = "built-in demo config"

// DefaultSlackAPIURL is where Slack's Web API lives unless the config says otherwise.
const DefaultSlackAPIURL = "https://slack.com/api/"

// maxFileSize bounds what Parse reads: a config is a page of YAML, and a
// multi-megabyte file is a mistake (or an attack on the parser).
const maxFileSize = 1 << 20

//go:embed default.yaml
var defaultYAML []byte

// Config is a loaded, checked configuration.
type Config struct {
	Roles      *policy.Roles
	Policy     *policy.Policy
	Actions    map[string]ActionConfig // by action name
	Slack      SlackConfig
	Requesters RequestersConfig
	Requests   RequestsConfig
	Resolve    ResolveConfig
	Anchors    AnchorsConfig
	API        APIConfig
	Retention  RetentionConfig
	MCP        MCPConfig // the MCP gateway's upstreams and callers (mcp.go)
	UI         UIConfig
	// AuditLog: serve writes every audit event as a log line too, for a
	// log pipeline that feeds a SIEM.
	AuditLog bool
	Source   string // the file name, or DefaultSource
	// Warnings are problems that do not stop the config from loading, each
	// with its line, in the order of the file.
	Warnings []*Error

	doc *document // to point at lines for checks made outside this package
}

// RequestersConfig says who may propose. By default only a member of some role.
type RequestersConfig struct {
	AllowUnknown bool // anyone may propose; conditions see requester.role == ""
	// SlackUsers maps a requester's id to the Slack user who hears the
	// outcome of their runs by direct message; a requester whose id is a
	// Slack user id needs no entry.
	SlackUsers map[string]string
}

// RequestsConfig bounds approval requests.
type RequestsConfig struct {
	// MaxLifetime is how long a request may wait at most, extensions
	// included (0: workflow.DefaultMaxRequestLifetime).
	MaxLifetime time.Duration
}

// AnchorsConfig says where serve publishes its audit anchors, outside the
// store, and how often.
type AnchorsConfig struct {
	// To is "log" (the default: a log line), a file (an absolute path, or
	// relative to the config's folder) that each anchor is appended to, or
	// an http(s) URL each anchor is POSTed to.
	To string
	// Every is how often (default DefaultAnchorEvery).
	Every time.Duration
}

// DefaultAnchorEvery is how often serve publishes an anchor unless
// anchors.every says.
const DefaultAnchorEvery = 10 * time.Minute

// AnchorFile is the file anchors go to, or "" when To is the log or a URL.
func (a AnchorsConfig) AnchorFile() string {
	if a.To == "" || a.To == "log" || strings.HasPrefix(a.To, "http://") || strings.HasPrefix(a.To, "https://") {
		return ""
	}
	return strings.TrimPrefix(a.To, "file:")
}

// ResolveConfig says who may resolve a run that needs attention.
type ResolveConfig struct {
	// Role: this role or above may (""; the highest role only).
	Role string
}

// RetentionConfig is what serve prunes (see workflow.Engine.Prune).
type RetentionConfig struct {
	// RunsOlderThan: runs that ended longer ago than this are pruned (0: serve
	// prunes nothing).
	RunsOlderThan time.Duration
	// Every is how often serve prunes (default DefaultPruneEvery).
	Every time.Duration
}

// DefaultPruneEvery is how often serve prunes when retention.every is not set.
const DefaultPruneEvery = 24 * time.Hour

// Errorf returns a config error at path (e.g. actions.request_refund.executor),
// with its line, for checks made after loading, such as which executors this
// build has.
func (c *Config) Errorf(path, format string, args ...any) *Error {
	return &Error{File: c.Source, Line: lineOr1(c.doc.line(path)), Path: path, Err: fmt.Errorf(format, args...)}
}

// ActionPath is the path of an action in the file, for Errorf.
func ActionPath(name string) string { return "actions" + keySegment(name) }

// lineOr1: a problem with no line of its own (a missing section, an empty
// file) is reported at the top of the file, so that every error has a line.
func lineOr1(l int) int { return max(l, 1) }

// ActionConfig says how one action is carried out and what people may not see of it.
type ActionConfig struct {
	Description string
	Executor    string // the executor's type, e.g. "demo", "webhook", "command"
	// ExecutorFields are the executor block's other fields, read by the
	// executor registry (package executor); nil for the short form.
	ExecutorFields map[string]any
	// Schema is the JSON Schema of the arguments, from schema: or the file
	// schema_file: names (SchemaFile, relative to the config's folder); nil
	// when the config gives none.
	Schema     []byte
	SchemaFile string
	Redact     []string // argument fields hidden from approvers: keys or dotted paths
	// ReconcileWithin is the executor block's reconcile.within: how long the
	// target may take to say what became of an attempt (0: the engine's
	// default).
	ReconcileWithin time.Duration
}

// Dir is the folder relative paths in the config start from: the config
// file's, or the working directory for the built-in config.
func (c *Config) Dir() string {
	if c.Source == DefaultSource {
		return "."
	}
	return filepath.Dir(c.Source)
}

// SlackConfig says where approvals are posted. Slack is on when the config
// has a slack: section (Given); serve then needs every setting Missing names.
// Without one, approvals come by the CLI and the agent API. Tokens come from
// the environment, not from here.
type SlackConfig struct {
	Given        bool // the config has a slack: section
	Channel      string
	AppID        string
	TeamID       string
	EnterpriseID string
	APIURL       string            // DefaultSlackAPIURL unless set; always ends in "/"
	UserGroups   map[string]string // role → Slack user group id, to mention who may approve
	// Command is the slash command's name as the Slack app defines it, e.g.
	// /approvals; "" leaves it to the bot's default (/runs).
	Command string
	// Digests are the daily lists of the runs still waiting, one per channel.
	Digests []Digest
	// AuditChannel is where a forced approval (break-glass) is announced.
	AuditChannel string
}

// Digest is one channel's daily digest: at Hour:Minute, local time in
// Location, the runs still waiting are listed in Channel.
type Digest struct {
	Channel      string
	Hour, Minute int
	Location     *time.Location
}

// Missing lists the settings of the slack: section that serve needs and the
// section lacks, by their paths in the file; nil when the config has no
// slack: section.
func (s SlackConfig) Missing() []string {
	if !s.Given {
		return nil
	}
	var missing []string
	if strings.TrimSpace(s.Channel) == "" {
		missing = append(missing, "slack.channel")
	}
	if strings.TrimSpace(s.AppID) == "" {
		missing = append(missing, "slack.app_id")
	}
	if strings.TrimSpace(s.TeamID) == "" && strings.TrimSpace(s.EnterpriseID) == "" {
		missing = append(missing, "slack.team_id (or slack.enterprise_id)")
	}
	return missing
}

// Error is a problem in a config file: where, in which field, and what.
type Error struct {
	File string
	Line int    // 1-based; 0 when the problem has no line (a missing section)
	Path string // e.g. policy.rules[0].when; "" for a YAML syntax error
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads and checks the config file at path. Errors from checking are *Error.
func Load(path string) (*Config, error) {
	// An unreadable file is a config error too (exit 2, nothing started); it
	// is the one kind without a line.
	unreadable := func(err error) error {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		return &Error{File: path, Err: fmt.Errorf("cannot read the config: %w", err)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, unreadable(err)
	}
	if info.IsDir() {
		return nil, &Error{File: path, Err: errors.New("cannot read the config: is a directory")}
	}
	if info.Size() > maxFileSize {
		return nil, &Error{File: path, Line: 1, Err: fmt.Errorf("file is %d bytes; a config is at most %d", info.Size(), maxFileSize)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, unreadable(err)
	}
	return Parse(path, data)
}

// Default returns the built-in demo config: the practice shop's roles, policy
// and actions. It panics only if the embedded file is broken, which a test rules out.
func Default() *Config {
	c, err := Parse(DefaultSource, defaultYAML)
	if err != nil {
		panic("config: the built-in config does not load: " + err.Error())
	}
	return c
}

// DefaultYAML returns the text of the built-in config, for `signoff config` and
// as a starting point for a file of one's own.
func DefaultYAML() []byte { return slices.Clone(defaultYAML) }

// The file's shape. Pointers tell "absent" from "zero" where it matters.
type fileConfig struct {
	Roles      []fileRole             `yaml:"roles"`
	Policy     *filePolicy            `yaml:"policy"`
	Actions    map[string]*fileAction `yaml:"actions"`
	Slack      *fileSlack             `yaml:"slack"`
	Requesters *fileRequesters        `yaml:"requesters"`
	Requests   *fileRequests          `yaml:"requests"`
	Resolve    *fileResolve           `yaml:"resolve"`
	Anchors    *fileAnchors           `yaml:"anchors"`
	API        *fileAPI               `yaml:"api"`
	Retention  *fileRetention         `yaml:"retention"`
	AuditLog   bool                   `yaml:"audit_log"`
	MCP        *fileMCP               `yaml:"mcp"`
	UI         *fileUI                `yaml:"ui"`
}

type fileRetention struct {
	RunsOlderThan string `yaml:"runs_older_than"`
	Every         string `yaml:"every"`
}

type fileAnchors struct {
	To    string `yaml:"to"`
	Every string `yaml:"every"`
}

type fileResolve struct {
	Role string `yaml:"role"`
}

type fileRequests struct {
	MaxLifetime string `yaml:"max_lifetime"`
}

type fileRequesters struct {
	AllowUnknown bool              `yaml:"allow_unknown"`
	SlackUsers   map[string]string `yaml:"slack_users"`
}

type fileRole struct {
	Name    string   `yaml:"name"`
	Members []string `yaml:"members"`
}

type filePolicy struct {
	Revision string     `yaml:"revision"`
	Rules    []fileRule `yaml:"rules"`
}

type fileRule struct {
	Name       string           `yaml:"name"`
	When       string           `yaml:"when"`
	Risk       string           `yaml:"risk"`
	Approval   *fileApproval    `yaml:"approval"`
	Notify     []string         `yaml:"notify"`
	Remind     []string         `yaml:"remind"`
	Escalate   []fileEscalation `yaml:"escalate"`
	Window     *fileWindow      `yaml:"window"`
	BreakGlass *fileBreakGlass  `yaml:"break_glass"`
	// Confirm (web) and StepUp ask for approvals confirmed on the web
	// console after a fresh sign-in (stepup.go).
	Confirm string      `yaml:"confirm"`
	StepUp  *fileStepUp `yaml:"step_up"`
}

// fileEscalation is one step of a rule's escalate: list.
type fileEscalation struct {
	After string `yaml:"after"`
	To    struct {
		Role  string   `yaml:"role"`
		Users []string `yaml:"users"`
	} `yaml:"to"`
	Extend string `yaml:"extend"`
}

type fileApproval struct {
	Role         string `yaml:"role"`
	Count        *int   `yaml:"count"`
	Expires      string `yaml:"expires"`
	SelfApproval bool   `yaml:"self_approval"`
	Edit         bool   `yaml:"edit"`
	// AnyOf and AllOf make a composite requirement instead of Role and
	// Count (see composite.go).
	AnyOf []fileRequirement `yaml:"any_of"`
	AllOf []fileRequirement `yaml:"all_of"`
}

type fileAction struct {
	Description string `yaml:"description"`
	// Executor is a type name (the short form, executor: demo) or a mapping
	// with type: and the type's own fields.
	Executor   any      `yaml:"executor"`
	Schema     any      `yaml:"schema"`
	SchemaFile string   `yaml:"schema_file"`
	Redact     []string `yaml:"redact"`
}

type fileSlack struct {
	Channel      string            `yaml:"channel"`
	AppID        string            `yaml:"app_id"`
	TeamID       string            `yaml:"team_id"`
	EnterpriseID string            `yaml:"enterprise_id"`
	APIURL       string            `yaml:"api_url"`
	UserGroups   map[string]string `yaml:"user_groups"`
	Command      string            `yaml:"command"`
	Digests      []fileDigest      `yaml:"digests"`
	AuditChannel string            `yaml:"audit_channel"`
}

type fileDigest struct {
	At      string `yaml:"at"`
	TZ      string `yaml:"tz"`
	Channel string `yaml:"channel"`
}

// digestAt is a digest's time of day: 24-hour HH:MM.
var digestAt = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

// slackChannelID is what a Slack channel's id looks like: C (public) or G
// (private), then capitals and digits. A name (#approvals) is not one.
var slackChannelID = regexp.MustCompile(`^[CG][A-Z0-9]+$`)

// slashCommand is what Slack accepts as a slash command's name: a slash and
// up to 31 lowercase letters, digits, dashes, underscores or dots.
var slashCommand = regexp.MustCompile(`^/[a-z0-9_.-]{1,31}$`)

// Parse checks a config held in memory; name is used in errors (and as Source).
// Every error it returns is an *Error.
func Parse(name string, data []byte) (*Config, error) {
	if len(data) > maxFileSize {
		return nil, &Error{File: name, Line: 1, Err: fmt.Errorf("file is %d bytes; a config is at most %d", len(data), maxFileSize)}
	}
	var fc fileConfig
	doc, err := decode(name, data, &fc)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.Line = lineOr1(ce.Line)
		}
		return nil, err
	}
	c := &checker{name: name, doc: doc}
	cfg, err := c.build(&fc)
	if err != nil {
		return nil, err
	}
	cfg.Source, cfg.doc, cfg.Warnings = name, doc, c.warnings
	return cfg, nil
}

// checker turns the decoded file into a Config, pointing at lines on the way.
type checker struct {
	name     string
	doc      *document
	warnings []*Error
}

func (c *checker) fail(path string, err error) error {
	return &Error{File: c.name, Line: lineOr1(c.doc.line(path)), Path: path, Err: err}
}

func (c *checker) warnf(path, format string, args ...any) {
	c.warnings = append(c.warnings, &Error{File: c.name, Line: lineOr1(c.doc.line(path)), Path: path, Err: fmt.Errorf(format, args...)})
}

func (c *checker) failf(path, format string, args ...any) error {
	return c.fail(path, fmt.Errorf(format, args...))
}

func (c *checker) build(fc *fileConfig) (*Config, error) {
	cfg := &Config{}
	var err error
	if cfg.Roles, err = c.roles(fc.Roles); err != nil {
		return nil, err
	}
	if cfg.Policy, err = c.policy(fc.Policy, cfg.Roles); err != nil {
		return nil, err
	}
	if cfg.Actions, err = c.actions(fc.Actions); err != nil {
		return nil, err
	}
	if cfg.Slack, err = c.slack(fc.Slack, cfg.Roles); err != nil {
		return nil, err
	}
	if cfg.API, err = c.api(fc.API); err != nil {
		return nil, err
	}
	if cfg.MCP, err = c.mcp(fc.MCP, cfg.Roles, cfg.API.Tokens); err != nil {
		return nil, err
	}
	cfg.AuditLog = fc.AuditLog
	if cfg.UI, err = c.ui(fc.UI, cfg.Roles); err != nil {
		return nil, err
	}
	if !cfg.Slack.Given {
		for i, r := range cfg.Policy.Rules() {
			if len(r.Notify) > 0 {
				c.warnf(fmt.Sprintf("policy.rules[%d].notify", i), "the config has no slack: section, so nobody is notified")
			}
		}
	}
	if err := c.breakGlassAudit(cfg); err != nil {
		return nil, err
	}
	if fc.Requesters != nil {
		if cfg.Requesters, err = c.requesters(fc.Requesters, cfg.Slack.Given); err != nil {
			return nil, err
		}
	}
	if fc.Requests != nil && strings.TrimSpace(fc.Requests.MaxLifetime) != "" {
		d, err := parseDuration(fc.Requests.MaxLifetime)
		if err != nil {
			return nil, c.fail("requests.max_lifetime", err)
		}
		cfg.Requests.MaxLifetime = d
	}
	if cfg.Anchors, err = c.anchors(fc.Anchors); err != nil {
		return nil, err
	}
	if fc.Resolve != nil {
		if cfg.Resolve.Role, err = c.resolveRole(fc.Resolve, cfg.Roles); err != nil {
			return nil, err
		}
	}
	if fc.Retention != nil {
		if cfg.Retention, err = c.retention(fc.Retention); err != nil {
			return nil, err
		}
	}
	if err := c.expiriesWithinLifetime(cfg); err != nil {
		return nil, err
	}
	if err := c.crossCheck(fc, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// roles reads the roles, lowest first: at least one.
func (c *checker) roles(frs []fileRole) (*policy.Roles, error) {
	if len(frs) == 0 {
		return nil, c.failf("roles", "at least one role is required (lowest first, e.g. - {name: team_lead, members: [U0LEAD0001]})")
	}
	roles := make([]policy.Role, len(frs))
	for i, r := range frs {
		roles[i] = policy.Role{Name: r.Name, Members: r.Members}
	}
	rs, err := policy.NewRoles(roles)
	if err != nil {
		var re *policy.RoleError
		if errors.As(err, &re) {
			return nil, c.fail(fmt.Sprintf("roles[%d].%s", re.Index, re.Field), re.Err)
		}
		return nil, c.fail("roles", err)
	}
	return rs, nil
}

// actions reads the actions in the order the file gives them: at least one.
func (c *checker) actions(fas map[string]*fileAction) (map[string]ActionConfig, error) {
	if len(fas) == 0 {
		return nil, c.failf("actions", "at least one action is required (e.g. request_refund: {executor: demo})")
	}
	out := map[string]ActionConfig{}
	for _, name := range keysInOrder(c.doc, "actions", fas) {
		ac, err := c.action(name, fas[name])
		if err != nil {
			return nil, err
		}
		out[name] = ac
	}
	return out, nil
}

// action reads one action: its name and redacted paths, its executor, and
// its arguments' schema.
func (c *checker) action(name string, a *fileAction) (ActionConfig, error) {
	path := "actions" + keySegment(name)
	if a == nil {
		return ActionConfig{}, c.failf(path+".executor", "required: which executor runs %s (e.g. demo)", name)
	}
	if _, err := workflow.NewActionSpec(name, nil, nil, nil); err != nil {
		return ActionConfig{}, c.fail(path, err)
	}
	for j, p := range a.Redact {
		if _, err := workflow.NewActionSpec(name, nil, nil, []string{p}); err != nil {
			return ActionConfig{}, c.failf(fmt.Sprintf("%s.redact[%d]", path, j), "bad path %q: want a key or keys joined by dots, like card.number", p)
		}
	}
	ac := ActionConfig{Description: strings.TrimSpace(a.Description), Redact: slices.Clone(a.Redact)}
	var err error
	if ac.Executor, ac.ExecutorFields, err = c.executor(path+".executor", name, a.Executor); err != nil {
		return ac, err
	}
	if ac.ReconcileWithin, err = c.reconcile(path+".executor.reconcile", ac.ExecutorFields); err != nil {
		return ac, err
	}
	if ac.Schema, ac.SchemaFile, err = c.schema(path, name, a); err != nil {
		return ac, err
	}
	return ac, nil
}

// resolveRole checks that the role that may resolve a run that needs
// attention is one of the roles.
func (c *checker) resolveRole(fr *fileResolve, rs *policy.Roles) (string, error) {
	role := strings.TrimSpace(fr.Role)
	if _, ok := rs.Rank(role); !ok {
		return "", c.failf("resolve.role", "%q is not one of the roles (%s): who may resolve a run that needs attention", fr.Role, strings.Join(rs.Names(), ", "))
	}
	return role, nil
}

// expiriesWithinLifetime checks that no rule gives its approvers longer than
// a request may live.
func (c *checker) expiriesWithinLifetime(cfg *Config) error {
	maxLife := cfg.Requests.MaxLifetime
	if maxLife == 0 {
		maxLife = workflow.DefaultMaxRequestLifetime
	}
	for i, r := range cfg.Policy.Rules() {
		if r.Approval != nil && time.Duration(r.Approval.Expires)*time.Second > maxLife {
			return c.failf(fmt.Sprintf("policy.rules[%d].approval.expires", i), "%s is longer than a request may live (requests.max_lifetime, %s)",
				time.Duration(r.Approval.Expires)*time.Second, maxLife)
		}
	}
	return nil
}

// retention reads the retention block: runs_older_than is required in it.
func (c *checker) retention(fr *fileRetention) (RetentionConfig, error) {
	rc := RetentionConfig{Every: DefaultPruneEvery}
	if strings.TrimSpace(fr.RunsOlderThan) == "" {
		return rc, c.failf("retention.runs_older_than", "required: how long ago a run must have ended to be pruned (e.g. 90d)")
	}
	d, err := parseDuration(fr.RunsOlderThan)
	if err != nil {
		return rc, c.fail("retention.runs_older_than", err)
	}
	rc.RunsOlderThan = d
	if strings.TrimSpace(fr.Every) != "" {
		if rc.Every, err = parseDuration(fr.Every); err != nil {
			return rc, c.fail("retention.every", err)
		}
		if rc.Every < time.Minute {
			return rc, c.failf("retention.every", "%s is too often: prune at most once a minute (the default is %s)", rc.Every, DefaultPruneEvery)
		}
	}
	return rc, nil
}

// AnchorTarget checks where anchors are to go (see AnchorsConfig.To) and
// returns it with a relative file made relative to dir.
func AnchorTarget(to, dir string) (string, error) {
	to = strings.TrimSpace(to)
	switch {
	case to == "":
		return "", errors.New("required: log, a file to append each anchor to, or an http(s) URL to POST it to")
	case to == "log":
		return to, nil
	case strings.HasPrefix(to, "http://") || strings.HasPrefix(to, "https://"):
		u, err := url.Parse(to)
		if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
			return "", fmt.Errorf("%q is not a URL to POST anchors to (http(s)://host/path, no credentials)", to)
		}
		return to, nil
	case strings.Contains(to, "://"):
		return "", fmt.Errorf("%q: want log, a file, or an http(s) URL", to)
	}
	if f := strings.TrimPrefix(to, "file:"); !filepath.IsAbs(f) {
		return filepath.Join(dir, f), nil
	}
	return to, nil
}

// anchors checks the anchors section: where to and how often.
func (c *checker) anchors(fa *fileAnchors) (AnchorsConfig, error) {
	out := AnchorsConfig{To: "log", Every: DefaultAnchorEvery}
	if fa == nil {
		return out, nil
	}
	to, err := AnchorTarget(fa.To, filepath.Dir(c.name))
	if err != nil {
		return out, c.fail("anchors.to", err)
	}
	out.To = to
	if s := strings.TrimSpace(fa.Every); s != "" {
		d, err := parseDuration(s)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return out, c.failf("anchors.every", "want a duration from 1s to 24h, like 10m, got %q", s)
		}
		out.Every = d
	}
	return out, nil
}

// maxReconcileWithin bounds reconcile.within: an attempt nobody can account
// for after a week is a person's to look into.
const maxReconcileWithin = 7 * 24 * time.Hour

// reconcile takes the executor block's reconcile: {within: D} out of fields
// (it is the engine's, not the executor's) and returns D, or 0 without one.
func (c *checker) reconcile(path string, fields map[string]any) (time.Duration, error) {
	v, ok := fields["reconcile"]
	if !ok {
		return 0, nil
	}
	delete(fields, "reconcile")
	m, ok := v.(map[string]any)
	if !ok {
		return 0, c.failf(path, "must be a mapping: reconcile: {within: 30m}")
	}
	for k := range m {
		if k != "within" {
			return 0, c.failf(path+"."+k, "unknown field (known: within)")
		}
	}
	s, ok := m["within"].(string)
	if !ok || strings.TrimSpace(s) == "" {
		return 0, c.failf(path+".within", "required: how long the target may take to say what became of an attempt, like 30m")
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return 0, c.failf(path+".within", "want a positive duration like 30m, got %q", s)
	}
	if d > maxReconcileWithin {
		return 0, c.failf(path+".within", "%s is longer than the %s allowed", s, maxReconcileWithin)
	}
	return d, nil
}

// executor reads an executor block: a type name, or a mapping with type: and
// the fields that type reads (checked by the executor registry).
func (c *checker) executor(path, action string, v any) (string, map[string]any, error) {
	switch e := v.(type) {
	case string:
		if strings.TrimSpace(e) == "" {
			break
		}
		return e, nil, nil
	case map[string]any:
		t, ok := e["type"].(string)
		if !ok || strings.TrimSpace(t) == "" {
			return "", nil, c.failf(path+".type", "required: which kind of executor (webhook, command, demo)")
		}
		fields := map[string]any{}
		for k, v := range e {
			if k != "type" {
				fields[k] = v
			}
		}
		return t, fields, nil
	case nil:
	default:
		return "", nil, c.failf(path, "must be a type (executor: demo) or a mapping with type: (executor: {type: webhook, url: …})")
	}
	return "", nil, c.failf(path, "required: which executor runs %s (e.g. demo)", action)
}

// maxSchemaFile bounds a schema file: a schema is a page of JSON.
const maxSchemaFile = 1 << 20

// schema reads an action's argument schema, inline or from schema_file
// (relative to the config's folder), and compiles it so that a broken one is
// refused here, with its line.
func (c *checker) schema(path, action string, a *fileAction) ([]byte, string, error) {
	var src []byte
	field := path + ".schema"
	switch {
	case a.Schema != nil && a.SchemaFile != "":
		return nil, "", c.failf(path+".schema_file", "give schema or schema_file, not both")
	case a.SchemaFile != "":
		field = path + ".schema_file"
		if c.name == DefaultSource {
			return nil, "", c.failf(field, "the built-in config has no folder to read %s from", a.SchemaFile)
		}
		file := a.SchemaFile
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(c.name), file)
		}
		b, err := readSmall(file, maxSchemaFile)
		if err != nil {
			return nil, "", c.failf(field, "cannot read %s: %v", file, err)
		}
		src = b
	case a.Schema != nil:
		if text, ok := a.Schema.(string); ok {
			src = []byte(text) // JSON text
			break
		}
		b, err := json.Marshal(a.Schema)
		if err != nil {
			return nil, "", c.failf(field, "cannot be read as JSON: %v", err)
		}
		src = b
	default:
		return nil, "", nil
	}
	if _, err := workflow.NewActionSpec(action, src, nil, nil); err != nil {
		return nil, "", c.fail(field, err)
	}
	return src, a.SchemaFile, nil
}

// readSmall reads a regular file of at most max bytes.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if info.Size() > max {
		return nil, fmt.Errorf("%d bytes; at most %d", info.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// crossCheck looks at the rules against the roles, the actions and Slack: a
// quorum nobody can reach is refused, as is a rule about an action the config
// does not have (a typo there sends the action to a later, perhaps laxer,
// rule). A quorum that rests on a Slack user group, whose size is known only
// at run time, and a policy without a catch-all are warnings.
func (c *checker) crossCheck(fc *fileConfig, cfg *Config) error {
	rules := cfg.Policy.Rules()
	catchAll := -1
	for i, r := range rules {
		path := fmt.Sprintf("policy.rules[%d]", i)
		for _, name := range cfg.Policy.NamedActions(i) {
			if _, ok := cfg.Actions[name]; !ok && !cfg.MCP.Lists(name) {
				return c.failf(path+".when", "no action is named %q (actions: %s)", name, strings.Join(sortedKeys(cfg.Actions), ", "))
			}
		}
		if catchAll >= 0 {
			c.warnf(path, "never reached: rules[%d] (%s) before it matches every action", catchAll, rules[catchAll].Name)
		} else if cfg.Policy.CatchAll(i) {
			catchAll = i
		}
		if a := r.Approval; a != nil && a.Requirement != nil {
			if err := c.checkComposite(path, a, cfg); err != nil {
				return err
			}
		} else if a != nil {
			countPath := path + ".approval.count"
			if fc.Policy.Rules[i].Approval.Count == nil {
				countPath = path + ".approval.role"
			}
			people := cfg.Roles.Members(a.Role)
			if a.Count <= len(people) {
				continue
			}
			var groups []string
			for _, role := range cfg.Roles.Names() {
				if g, ok := cfg.Slack.UserGroups[role]; ok && cfg.Roles.AtLeast(role, a.Role) {
					groups = append(groups, fmt.Sprintf("%s (%s)", g, role))
				}
			}
			who := fmt.Sprintf("%d %s listed for %s and above", len(people), plural(len(people), "person is", "people are"), a.Role)
			if len(groups) == 0 {
				return c.failf(countPath, "%d %s needed, but only %s: the rule could never be satisfied", a.Count, plural(a.Count, "approval", "approvals"), who)
			}
			c.warnf(countPath, "%d %s needed and %s; the rest must come from Slack user group %s, whose size is known only when a run waits",
				a.Count, plural(a.Count, "approval", "approvals"), who, strings.Join(groups, ", "))
		}
	}
	if catchAll < 0 {
		c.warnf(fmt.Sprintf("policy.rules[%d]", len(rules)-1),
			`no rule matches every action: an action no rule matches is refused when proposed (end with {name: everything-else, when: "true", ...})`)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (c *checker) policy(fp *filePolicy, roles *policy.Roles) (*policy.Policy, error) {
	if fp == nil {
		return nil, c.failf("policy", "required: a revision and the rules")
	}
	if strings.TrimSpace(fp.Revision) == "" {
		return nil, c.failf("policy.revision", `required: a name for this version of the policy, e.g. "2026-11-29.1"`)
	}
	if len(fp.Rules) == 0 {
		return nil, c.failf("policy.rules", "at least one rule is required; the last is usually {name: everything-else, when: \"true\", ...}")
	}
	rules := make([]policy.Rule, len(fp.Rules))
	for i, fr := range fp.Rules {
		rules[i] = policy.Rule{Name: fr.Name, When: fr.When, Risk: record.Risk(fr.Risk)}
		notify, err := c.notify(fmt.Sprintf("policy.rules[%d].notify", i), fr.Notify)
		if err != nil {
			return nil, err
		}
		rules[i].Notify = notify
		if rules[i].Remind, err = c.remind(i, fr); err != nil {
			return nil, err
		}
		if rules[i].Escalate, err = c.escalate(i, fr, roles); err != nil {
			return nil, err
		}
		if rules[i].Window, err = c.window(i, fr.Window); err != nil {
			return nil, err
		}
		if rules[i].BreakGlass, err = c.breakGlass(i, fr, roles); err != nil {
			return nil, err
		}
		stepUp, err := c.stepUp(i, fr)
		if err != nil {
			return nil, err
		}
		if fr.Approval == nil {
			continue
		}
		fa := fr.Approval
		path := fmt.Sprintf("policy.rules[%d].approval", i)
		count := 1
		if fa.Count != nil {
			count = *fa.Count
		}
		if strings.TrimSpace(fa.Expires) == "" {
			return nil, c.failf(path+".expires", "required: how long approvers have, e.g. 72h or 3d")
		}
		d, err := parseDuration(fa.Expires)
		if err != nil {
			return nil, c.fail(path+".expires", err)
		}
		req, err := c.requirement(path, fa)
		if err != nil {
			return nil, err
		}
		rules[i].Approval = &record.ApprovalSpec{
			Role:         fa.Role,
			Count:        count,
			Expires:      record.Seconds(d / time.Second),
			SelfApproval: fa.SelfApproval,
			Edit:         fa.Edit,
			Requirement:  req,
			StepUp:       stepUp,
		}
	}
	pol, err := policy.New(fp.Revision, rules, roles)
	if err != nil {
		var re *policy.RuleError
		if errors.As(err, &re) {
			return nil, c.fail(fmt.Sprintf("policy.rules[%d].%s", re.Index, re.Field), re.Err)
		}
		return nil, c.fail("policy", err)
	}
	return pol, nil
}

// remind reads a rule's remind: list: how long before the deadline the
// people who may still decide are reminded, each positive and shorter than
// the rule's approval expiry (policy.New sorts them, longest first).
func (c *checker) remind(i int, fr fileRule) ([]record.Seconds, error) {
	path := fmt.Sprintf("policy.rules[%d].remind", i)
	if len(fr.Remind) == 0 {
		return nil, nil
	}
	if fr.Approval == nil {
		return nil, c.failf(path, "the rule needs no approval, so there is no deadline to remind of")
	}
	// A missing or bad expires is told at its own line, just after.
	expires, _ := parseDuration(fr.Approval.Expires)
	var out []record.Seconds
	for j, text := range fr.Remind {
		p := fmt.Sprintf("%s[%d]", path, j)
		d, err := parseDuration(text)
		if err != nil {
			return nil, c.fail(p, err)
		}
		if expires > 0 && d >= expires {
			return nil, c.failf(p, "%s: a reminder must be shorter than the approval's expires (%s), or it would be due before the request is made", text, fr.Approval.Expires)
		}
		out = append(out, record.Seconds(d/time.Second))
	}
	return out, nil
}

// escalate reads a rule's escalate: list: each step after a positive time
// from the request, later than the one before and sooner than the expiry,
// to a known role or to Slack users, optionally extending the deadline.
func (c *checker) escalate(i int, fr fileRule, roles *policy.Roles) ([]record.EscalationStep, error) {
	path := fmt.Sprintf("policy.rules[%d].escalate", i)
	if len(fr.Escalate) == 0 {
		return nil, nil
	}
	if fr.Approval == nil {
		return nil, c.failf(path, "the rule needs no approval, so there is nobody to escalate to")
	}
	expires, _ := parseDuration(fr.Approval.Expires)
	var out []record.EscalationStep
	var prev time.Duration
	for j, fe := range fr.Escalate {
		p := fmt.Sprintf("%s[%d]", path, j)
		step, after, err := c.escalationStep(p, fe, roles)
		if err != nil {
			return nil, err
		}
		if after <= prev && j > 0 {
			return nil, c.failf(p+".after", "%s: each step must come later than the one before (%s)", fe.After, fr.Escalate[j-1].After)
		}
		if expires > 0 && after >= expires {
			return nil, c.failf(p+".after", "%s: an escalation must come sooner than the approval's expires (%s)", fe.After, fr.Approval.Expires)
		}
		prev = after
		out = append(out, step)
	}
	return out, nil
}

func (c *checker) escalationStep(p string, fe fileEscalation, roles *policy.Roles) (record.EscalationStep, time.Duration, error) {
	var step record.EscalationStep
	after, err := c.wholeDuration(p+".after", fe.After)
	if err != nil {
		return step, 0, err
	}
	step.After = record.Seconds(after / time.Second)
	if fe.Extend != "" {
		ext, err := c.wholeDuration(p+".extend", fe.Extend)
		if err != nil {
			return step, 0, err
		}
		step.Extend = record.Seconds(ext / time.Second)
	}
	switch {
	case fe.To.Role != "" && len(fe.To.Users) > 0:
		return step, 0, c.failf(p+".to", "name a role or users, not both")
	case fe.To.Role != "":
		if _, ok := roles.Rank(fe.To.Role); !ok {
			return step, 0, c.failf(p+".to.role", "%q is not a role: roles are %s", fe.To.Role, strings.Join(roles.Names(), ", "))
		}
		step.Role = fe.To.Role
	case len(fe.To.Users) > 0:
		for k, u := range fe.To.Users {
			if !slackUser.MatchString(u) {
				return step, 0, c.failf(fmt.Sprintf("%s.to.users[%d]", p, k), "%q is not a Slack user id (U… or W…)", u)
			}
		}
		step.Users = slices.Clone(fe.To.Users)
	default:
		return step, 0, c.failf(p+".to", "required: {role: R} or {users: [U…]}, who may decide from then on")
	}
	return step, after, nil
}

// wholeDuration reads a required positive duration of whole seconds.
func (c *checker) wholeDuration(path, text string) (time.Duration, error) {
	if strings.TrimSpace(text) == "" {
		return 0, c.failf(path, "required: a duration like 4h")
	}
	d, err := parseDuration(text)
	if err != nil {
		return 0, c.fail(path, err)
	}
	if d <= 0 {
		return 0, c.failf(path, "%q: must be longer than zero", text)
	}
	if d%time.Second != 0 {
		return 0, c.failf(path, "%q: must be whole seconds", text)
	}
	return d, nil
}

// slackChannelOrUser is what a rule's notify: may name: a Slack channel id
// (C…, or G… for an older private channel) or a Slack user id (U…, W…).
// Names (#oncall) are refused: a channel can be renamed, its id stays.
var slackChannelOrUser = regexp.MustCompile(`^[CGUW][A-Z0-9]{2,20}$`)

// slackUser is a Slack user id, the form requesters.slack_users maps to, and
// the form of a requester id that is a Slack user itself.
var slackUser = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// notify reads a rule's notify: list: Slack channel or user ids, each once.
func (c *checker) notify(path string, list []string) ([]string, error) {
	var out []string
	for j, to := range list {
		p := fmt.Sprintf("%s[%d]", path, j)
		to = strings.TrimSpace(to)
		if !slackChannelOrUser.MatchString(to) {
			return nil, c.failf(p, "%q: want a Slack channel id (C…) or user id (U…, W…); a channel's id is at the bottom of its details in Slack", to)
		}
		if slices.Contains(out, to) {
			return nil, c.failf(p, "%s is listed twice", to)
		}
		out = append(out, to)
	}
	return out, nil
}

// requesters reads the requesters: block: who may propose, and which
// requesters are Slack users who hear their runs' outcome.
func (c *checker) requesters(fr *fileRequesters, slackOn bool) (RequestersConfig, error) {
	rc := RequestersConfig{AllowUnknown: fr.AllowUnknown}
	for _, id := range keysInOrder(c.doc, "requesters.slack_users", fr.SlackUsers) {
		path := "requesters.slack_users" + keySegment(id)
		user := strings.TrimSpace(fr.SlackUsers[id])
		if strings.TrimSpace(id) == "" {
			return rc, c.failf(path, "empty requester id")
		}
		if !slackUser.MatchString(user) {
			return rc, c.failf(path, "%q: want the Slack user id (U… or W…) of the person requester %s stands for", user, id)
		}
		if rc.SlackUsers == nil {
			rc.SlackUsers = map[string]string{}
		}
		rc.SlackUsers[id] = user
	}
	if len(rc.SlackUsers) > 0 && !slackOn {
		c.warnf("requesters.slack_users", "the config has no slack: section, so nobody is sent the outcome")
	}
	return rc, nil
}

// SlackUserOf is the Slack user who stands for a requester: the one
// requesters.slack_users maps it to, or the id itself when it is a Slack
// user id; "" when none.
func (r RequestersConfig) SlackUserOf(id string) string {
	if u, ok := r.SlackUsers[id]; ok {
		return u
	}
	if slackUser.MatchString(id) {
		return id
	}
	return ""
}

func (c *checker) slack(fs *fileSlack, roles *policy.Roles) (SlackConfig, error) {
	sc := SlackConfig{APIURL: DefaultSlackAPIURL}
	if fs == nil {
		return sc, nil
	}
	sc.Given = true
	sc.Channel, sc.AppID, sc.TeamID, sc.EnterpriseID = fs.Channel, fs.AppID, fs.TeamID, fs.EnterpriseID
	if fs.Command != "" {
		if !slashCommand.MatchString(fs.Command) {
			return sc, c.failf("slack.command", "%q: want the slash command's name as the app defines it, like /approvals (a slash, then up to 31 lowercase letters, digits, -, _ or .)", fs.Command)
		}
		sc.Command = fs.Command
	}
	if fs.APIURL != "" {
		u, err := url.Parse(fs.APIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return sc, c.failf("slack.api_url", "%q: want an http(s) URL like %s", fs.APIURL, DefaultSlackAPIURL)
		}
		sc.APIURL = fs.APIURL
		// Slack clients join method names straight onto the base URL.
		if !strings.HasSuffix(sc.APIURL, "/") {
			sc.APIURL += "/"
		}
	}
	if len(fs.UserGroups) > 0 {
		sc.UserGroups = map[string]string{}
		for _, role := range keysInOrder(c.doc, "slack.user_groups", fs.UserGroups) {
			path := "slack.user_groups" + keySegment(role)
			if _, ok := roles.Rank(role); !ok {
				return sc, c.failf(path, "unknown role %q (roles: %s)", role, strings.Join(roles.Names(), ", "))
			}
			if strings.TrimSpace(fs.UserGroups[role]) == "" {
				return sc, c.failf(path, "empty user group id")
			}
			sc.UserGroups[role] = fs.UserGroups[role]
		}
	}
	if sc.AuditChannel = fs.AuditChannel; sc.AuditChannel != "" && !slackChannelID.MatchString(sc.AuditChannel) {
		return sc, c.failf("slack.audit_channel", "%q is not a Slack channel id (C… or G…)", sc.AuditChannel)
	}
	var err error
	sc.Digests, err = c.digests(fs.Digests)
	return sc, err
}

// digests checks slack.digests: a time of day, a time zone the system knows
// and a channel id each, one digest per channel.
func (c *checker) digests(fds []fileDigest) ([]Digest, error) {
	var ds []Digest
	seen := map[string]int{}
	for i, fd := range fds {
		path := fmt.Sprintf("slack.digests[%d]", i)
		m := digestAt.FindStringSubmatch(fd.At)
		if m == nil {
			return nil, c.failf(path+".at", "%q: want a time of day as HH:MM, 24-hour, like 09:00", fd.At)
		}
		if strings.TrimSpace(fd.TZ) == "" {
			return nil, c.failf(path, "no tz: want a time zone like Europe/Paris (or UTC)")
		}
		loc, err := time.LoadLocation(fd.TZ)
		if err != nil || fd.TZ == "Local" { // Local is the machine's, not the config's
			return nil, c.failf(path+".tz", "%q: unknown time zone: want one like Europe/Paris (or UTC)", fd.TZ)
		}
		if !slackChannelID.MatchString(fd.Channel) {
			return nil, c.failf(path+".channel", "%q: want a Slack channel id like C0123456789 (channel details, at the bottom), not its name", fd.Channel)
		}
		if j, ok := seen[fd.Channel]; ok {
			return nil, c.failf(path+".channel", "%s has a digest already (slack.digests[%d]): one per channel", fd.Channel, j)
		}
		seen[fd.Channel] = i
		hour, _ := strconv.Atoi(m[1])
		minute, _ := strconv.Atoi(m[2])
		ds = append(ds, Digest{Channel: fd.Channel, Hour: hour, Minute: minute, Location: loc})
	}
	return ds, nil
}

// ParseDuration reads a duration as the config writes it (72h, 90m, 3d,
// 3d12h), longer than zero and in whole seconds, for flags that take one.
func ParseDuration(s string) (time.Duration, error) { return parseDuration(s) }

// parseDuration reads Go durations (72h, 90m, 1h30m) and whole days (3d, 3d12h),
// which Go's syntax lacks and approval deadlines often want.
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration: write it like 72h, 30m or 3d", s)
	t := strings.TrimSpace(s)
	var d time.Duration
	if days, rest, ok := strings.Cut(t, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || days[0] == '+' || days[0] == '-' {
			return 0, bad
		}
		if n > 3660 {
			return 0, fmt.Errorf("%q is more than ten years", s)
		}
		d = time.Duration(n) * 24 * time.Hour
		t = rest
		if t == "" {
			t = "0s"
		}
	}
	r, err := time.ParseDuration(t)
	if err != nil || (d > 0 && r < 0) {
		return 0, bad
	}
	d += r
	switch {
	case d <= 0:
		return 0, fmt.Errorf("%q: must be longer than zero", s)
	case d%time.Second != 0:
		return 0, fmt.Errorf("%q: must be whole seconds", s)
	}
	return d, nil
}
