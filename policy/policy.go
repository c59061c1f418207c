package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"github.com/signoff-dev/signoff/internal/jsonvalue"
	"github.com/signoff-dev/signoff/record"
)

// CostLimit caps the work one condition may do in one evaluation, in CEL
// cost units (about one per operation). The rules a person writes use a few
// dozen; the cap stops a hostile or careless expression, such as nested
// comprehensions over a big argument list, from stalling the engine.
const CostLimit = 1_000_000

// ErrNoRuleMatched: no rule's condition held. Policy fails closed: an action
// nobody wrote a rule for does not run.
var ErrNoRuleMatched = errors.New("no policy rule matched")

// Rule is one policy rule: when its condition holds for an action, the action
// has its risk and needs its approval (nil: none).
type Rule struct {
	Name     string
	When     string // a CEL expression of type bool
	Risk     record.Risk
	Approval *record.ApprovalSpec
	// Notify are who hears the outcome of a run the rule decided, without
	// being asked to decide: Slack channel or user ids (the config checks
	// their form).
	Notify []string
	// Remind are how long before the deadline of the rule's approval the
	// people who may still decide are reminded, longest first; each is
	// positive and shorter than the approval's Expires.
	Remind []record.Seconds
	// Escalate are the steps that widen who may decide the rule's approval
	// as time passes since the request, in order of After, each sooner than
	// the approval's Expires; a step names a role or users.
	Escalate []record.EscalationStep
	// Window, when set, is when the rule's approved actions may run; an
	// approved run waits for it as scheduled.
	Window *record.Window
	// BreakGlass, when set, lets its role force the rule's approval (see
	// record.BreakGlass); it needs an approval, known roles and a positive
	// review time.
	BreakGlass *record.BreakGlass
}

// RuleError says which rule, and which of its fields, New refused, so a
// config loader can point at the line.
type RuleError struct {
	Index int    // position in the rules
	Field string // name, when, risk, approval.role, approval.count, approval.expires
	Err   error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("rules[%d].%s: %v", e.Index, e.Field, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

// Policy is a compiled, ordered list of rules: the first rule whose condition
// holds decides. It is built once per config load and is safe for concurrent use.
type Policy struct {
	revision string
	rules    []Rule
	programs []cel.Program
	shapes   []conditionShape
}

// conditionShape is what a load-time check can tell about a condition without
// evaluating it.
type conditionShape struct {
	always  bool      // the condition is the constant true
	actions []string  // action names it compares action.name with, in order
	args    []ArgRead // the arguments it reads, in order
}

// ArgRead is an argument a condition reads, action.args.NAME or
// action.args["NAME"], and the actions it can be read on: those a test of
// action.name beside it (a && b, or a ? b : c) lets through, all of them
// when Actions is nil, less Except. A read beside has(action.args.NAME) or
// "NAME" in action.args is guarded and not listed: it never fails.
type ArgRead struct {
	Name    string
	Actions []string // nil: any action
	Except  []string
}

// ArgsRead lists the arguments rule i's condition reads, so that a loader can
// warn of one the action's schema does not have: reading it fails on every
// run, and the run is handed to a person.
func (p *Policy) ArgsRead(i int) []ArgRead {
	out := slices.Clone(p.shapes[i].args)
	for j := range out {
		out[j].Actions, out[j].Except = slices.Clone(out[j].Actions), slices.Clone(out[j].Except)
	}
	return out
}

// Input is what a condition can see about one action.
type Input struct {
	Action    record.Action
	Index     int // position of the action in the proposal
	Evidence  []record.Evidence
	Requester record.Person
	// RequesterRole is the highest role the requester holds, "" for none.
	RequesterRole string
	TaskID        string
	// EvidenceCanonical says Evidence is jsonvalue.Canonical's output, as
	// the engine stores every proposal's: it decodes, so Evaluate decodes
	// it only when a rule reads it. Otherwise it is decoded first, and
	// evidence that does not decode fails the evaluation.
	EvidenceCanonical bool
}

// Outcome is what policy decided for one action.
type Outcome struct {
	Rule       string
	Risk       record.Risk
	Approval   *record.ApprovalSpec    // nil: the action may run without approval
	Notify     []string                // the rule's Notify
	Remind     []record.Seconds        // the rule's Remind
	Escalate   []record.EscalationStep // the rule's Escalate
	BreakGlass *record.BreakGlass      // the rule's BreakGlass
	Window     *record.Window          // the rule's Window
}

// celEnv declares what conditions can see:
//
//	action    name (string), index (int), args (the arguments object, map(string, dyn))
//	evidence  list of: source (string), data (any JSON)
//	requester id, name, role (strings; role is "" for a requester in no role)
//	task      string: the task id, "" when none
//	mcp       upstream, tool (strings: of an action mcp:<upstream>.<tool>,
//	          "" for any other), untrusted_annotations (the tool's
//	          annotations as its server lists them, map(string, dyn); {} when
//	          none): a server's claims, which a hostile one makes up
//
// action, evidence and requester are objects with declared fields, so that a
// typo such as action.nme is a load error rather than a failure at evaluation
// that sends every matching run to a person. Arguments and evidence data stay
// dynamic: their shape is the action's, not the policy's.
//
// JSON numbers arrive as int when integral and double otherwise; double(x)
// accepts both, and comparisons between int and double work.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[celAction](), reflect.TypeFor[celEvidence](), reflect.TypeFor[celRequester](), reflect.TypeFor[celMCP](), ext.ParseStructTags(true)),
		cel.Variable("action", cel.ObjectType(celTypeName[celAction]())),
		cel.Variable("evidence", cel.ListType(cel.ObjectType(celTypeName[celEvidence]()))),
		cel.Variable("requester", cel.ObjectType(celTypeName[celRequester]())),
		cel.Variable("task", cel.StringType),
		cel.Variable("mcp", cel.ObjectType(celTypeName[celMCP]())),
	)
})

// The objects conditions see; the cel tags are the field names in conditions.
type celAction struct {
	Name  string         `cel:"name"`
	Index int64          `cel:"index"`
	Args  map[string]any `cel:"args"`
}

type celEvidence struct {
	Source string `cel:"source"`
	Data   any    `cel:"data"`
}

type celRequester struct {
	ID   string `cel:"id"`
	Name string `cel:"name"`
	Role string `cel:"role"`
}

// celMCP is what a condition sees of an upstream MCP tool's call.
type celMCP struct {
	Upstream    string         `cel:"upstream"`
	Tool        string         `cel:"tool"`
	Annotations map[string]any `cel:"untrusted_annotations"`
}

// MCPActionPrefix starts the action name of an upstream MCP tool:
// mcp:<upstream>.<tool> (an upstream's name holds no dot).
const MCPActionPrefix = "mcp:"

// MCPAnnotationsSource is the evidence source under which the MCP gateway
// puts a tool's annotations, as its server listed them; conditions read
// them as mcp.untrusted_annotations. Whoever proposes may put anything
// there: they are claims, never facts.
const MCPAnnotationsSource = "mcp.annotations"

// mcpVars are the mcp variable of an action: its upstream and tool from
// its name, and the annotations of the first evidence of
// MCPAnnotationsSource that is an object.
func mcpVars(name string, evidence []celEvidence) celMCP {
	out := celMCP{Annotations: map[string]any{}}
	rest, ok := strings.CutPrefix(name, MCPActionPrefix)
	if !ok {
		return out
	}
	out.Upstream, out.Tool, _ = strings.Cut(rest, ".")
	for _, e := range evidence {
		if m, ok := e.Data.(map[string]any); ok && e.Source == MCPAnnotationsSource {
			out.Annotations = m
			break
		}
	}
	return out
}

// celTypeName is the name ext.NativeTypes gives a Go struct: package.Type.
func celTypeName[T any]() string { return reflect.TypeFor[T]().String() }

// celFieldsHint follows a compile error about an undefined field.
const celFieldsHint = " (action has name, index, args; requester has id, name, role; evidence has source, data; mcp has upstream, tool, untrusted_annotations; arguments are action.args.NAME)"

// New compiles every rule. It refuses, with a *RuleError: an empty or
// repeated name, a condition that does not compile or is not a bool, a risk
// other than low, medium or high, an approval by a role roles does not have, a
// count below 1 and an expiry below one second.
func New(revision string, rules []Rule, roles *Roles) (*Policy, error) {
	if strings.TrimSpace(revision) == "" {
		return nil, errors.New("policy: revision is empty")
	}
	if len(rules) == 0 {
		return nil, errors.New("policy: no rules")
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: build CEL environment: %w", err)
	}
	p := &Policy{revision: revision}
	seen := map[string]int{}
	for i, r := range rules {
		fail := func(field string, err error) (*Policy, error) {
			return nil, &RuleError{Index: i, Field: field, Err: err}
		}
		if err := checkName(r.Name); err != nil {
			return fail("name", err)
		}
		if j, dup := seen[r.Name]; dup {
			return fail("name", fmt.Errorf("duplicate rule name %q (also rules[%d])", r.Name, j))
		}
		seen[r.Name] = i
		prg, shape, err := compileCondition(env, r.When)
		if err != nil {
			return fail("when", err)
		}
		if !r.Risk.Valid() {
			return fail("risk", fmt.Errorf("risk %q: want low, medium or high", r.Risk))
		}
		if r.Approval != nil {
			copied := *r.Approval
			r.Approval = &copied
		}
		if a := r.Approval; a != nil {
			if a.Requirement != nil {
				if err := composite(a, roles); err != nil {
					return fail(err.Path, err.Err)
				}
			}
			if _, ok := roles.Rank(a.Role); !ok {
				return fail("approval.role", fmt.Errorf("unknown role %q (roles: %s)", a.Role, strings.Join(roles.Names(), ", ")))
			}
			if a.Count < 1 {
				return fail("approval.count", fmt.Errorf("count %d: at least 1 approver is needed", a.Count))
			}
			if a.Expires < 1 {
				return fail("approval.expires", errors.New("must be at least 1s"))
			}
			copied := *a
			r.Approval = &copied
		}
		r.Notify = slices.Clone(r.Notify)
		remind, err := checkRemind(r.Remind, r.Approval)
		if err != nil {
			return fail("remind", err)
		}
		r.Remind = remind
		if err := checkEscalate(r.Escalate, r.Approval, roles); err != nil {
			return fail("escalate", err)
		}
		r.Escalate = cloneSteps(r.Escalate)
		if r.Window != nil {
			if err := r.Window.Check(); err != nil {
				return fail("window", err)
			}
			r.Window = cloneWindow(r.Window)
		}
		if err := checkBreakGlass(r.BreakGlass, r.Approval, roles); err != nil {
			return fail("break_glass", err)
		}
		r.BreakGlass = cloneBreakGlass(r.BreakGlass)
		p.rules = append(p.rules, r)
		p.programs = append(p.programs, prg)
		p.shapes = append(p.shapes, shape)
	}
	return p, nil
}

// CatchAll reports whether rule i's condition is the constant true: it matches
// every action, so no rule after it is ever reached.
func (p *Policy) CatchAll(i int) bool { return p.shapes[i].always }

// NamedActions returns the action names rule i's condition compares
// action.name with (==, != or in a list of literals), so a loader can refuse a
// name no action has: such a rule never matches, and its actions fall through
// to a later, perhaps laxer, rule.
func (p *Policy) NamedActions(i int) []string { return slices.Clone(p.shapes[i].actions) }

// shapeOf reads a checked condition for conditionShape.
func shapeOf(a *cel.Ast) conditionShape {
	root := a.NativeRep().Expr()
	var sh conditionShape
	if root.Kind() == celast.LiteralKind && root.AsLiteral() == types.True {
		sh.always = true
	}
	isActionName := func(e celast.Expr) bool {
		if e.Kind() != celast.SelectKind {
			return false
		}
		sel := e.AsSelect()
		return sel.FieldName() == "name" && !sel.IsTestOnly() &&
			sel.Operand().Kind() == celast.IdentKind && sel.Operand().AsIdent() == "action"
	}
	addLiteral := func(e celast.Expr) {
		if e.Kind() != celast.LiteralKind {
			return
		}
		if s, ok := e.AsLiteral().(types.String); ok && !slices.Contains(sh.actions, string(s)) {
			sh.actions = append(sh.actions, string(s))
		}
	}
	sh.args = argReads(root)
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		if len(args) != 2 {
			return
		}
		switch call.FunctionName() {
		case operators.Equals, operators.NotEquals:
			if isActionName(args[0]) {
				addLiteral(args[1])
			} else if isActionName(args[1]) {
				addLiteral(args[0])
			}
		case operators.In:
			if isActionName(args[0]) && args[1].Kind() == celast.ListKind {
				for _, el := range args[1].AsList().Elements() {
					addLiteral(el)
				}
			}
		}
	}))
	return sh
}

// UnknownArg is an argument a rule's condition reads that the schema of an
// action the rule applies to does not name.
type UnknownArg struct {
	Rule   int // the rule's index
	Arg    string
	Action string
	// Known are the properties the action's schema names.
	Known []string
}

// UnknownArgs lists the arguments each rule's condition reads (ArgsRead)
// that the schema of an action it applies to does not name (DeclaresArg),
// by rule, then as read, then by action name. An action without a schema, or
// whose schema names no property, is not checked.
func (p *Policy) UnknownArgs(actions map[string]*ActionSpec) []UnknownArg {
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []UnknownArg
	for i, sh := range p.shapes {
		seen := map[string]bool{}
		for _, r := range sh.args {
			on := r.Actions
			if on == nil {
				on = names
			}
			for _, name := range on {
				spec, ok := actions[name]
				if !ok || slices.Contains(r.Except, name) || seen[r.Name+"\x00"+name] {
					continue
				}
				if declared, known := spec.DeclaresArg(r.Name); known && !declared {
					seen[r.Name+"\x00"+name] = true
					known, _ := spec.SchemaArgs()
					out = append(out, UnknownArg{Rule: i, Arg: r.Name, Action: name, Known: known})
				}
			}
		}
	}
	return out
}

// argScope is the actions a part of a condition is evaluated for, as far
// as the tests of action.name around it tell: only (nil: any action) less
// except; guarded are the arguments a presence test beside it checked.
type argScope struct {
	only, except []string
	guarded      []string
}

// argReads lists the arguments root reads, each once per scope.
func argReads(root celast.Expr) []ArgRead {
	var out []ArgRead
	seen := map[string]bool{}
	var walk func(e celast.Expr, sc argScope)
	walk = func(e celast.Expr, sc argScope) {
		if e.Kind() == celast.CallKind {
			call := e.AsCall()
			switch call.FunctionName() {
			case operators.LogicalAnd:
				conj := conjuncts(e)
				inner := sc
				for _, c := range conj {
					inner = narrow(inner, c)
				}
				for _, c := range conj {
					walk(c, inner)
				}
				return
			case operators.Conditional:
				args := call.Args()
				walk(args[0], sc)
				walk(args[1], narrow(sc, args[0]))
				walk(args[2], sc)
				return
			}
		}
		if name, ok := argSelected(e); ok && !slices.Contains(sc.guarded, name) && (sc.only == nil || len(sc.only) > 0) {
			key := fmt.Sprint(name, sc.only, sc.except)
			if !seen[key] {
				seen[key] = true
				out = append(out, ArgRead{Name: name, Actions: slices.Clone(sc.only), Except: slices.Clone(sc.except)})
			}
		}
		for _, c := range children(e) {
			walk(c, sc)
		}
	}
	walk(root, argScope{})
	return out
}

// conjuncts flattens a && b && c.
func conjuncts(e celast.Expr) []celast.Expr {
	if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != operators.LogicalAnd {
		return []celast.Expr{e}
	}
	var out []celast.Expr
	for _, a := range e.AsCall().Args() {
		out = append(out, conjuncts(a)...)
	}
	return out
}

// narrow is sc where the test e holds: action.name == "x", action.name in
// [...], action.name != "x", has(action.args.x) or "x" in action.args.
func narrow(sc argScope, e celast.Expr) argScope {
	if e.Kind() == celast.SelectKind && e.AsSelect().IsTestOnly() {
		if name, ok := argSelectOf(e.AsSelect()); ok {
			sc.guarded = append(slices.Clone(sc.guarded), name)
		}
		return sc
	}
	if e.Kind() != celast.CallKind || len(e.AsCall().Args()) != 2 {
		return sc
	}
	call := e.AsCall()
	l, r := call.Args()[0], call.Args()[1]
	var names []string
	switch call.FunctionName() {
	case operators.Equals, operators.NotEquals:
		if isActionIdentField(r, "name") {
			l, r = r, l
		}
		s, ok := stringLiteral(r)
		if !isActionIdentField(l, "name") || !ok {
			return sc
		}
		if call.FunctionName() == operators.NotEquals {
			sc.except = append(slices.Clone(sc.except), s)
			return sc
		}
		names = []string{s}
	case operators.In:
		if s, ok := stringLiteral(l); ok && isActionIdentField(r, "args") {
			sc.guarded = append(slices.Clone(sc.guarded), s)
			return sc
		}
		if !isActionIdentField(l, "name") || r.Kind() != celast.ListKind {
			return sc
		}
		for _, el := range r.AsList().Elements() {
			s, ok := stringLiteral(el)
			if !ok {
				return sc // a name not known before evaluation: any action
			}
			names = append(names, s)
		}
	default:
		return sc
	}
	only := []string{}
	for _, n := range names {
		if (sc.only == nil || slices.Contains(sc.only, n)) && !slices.Contains(sc.except, n) && !slices.Contains(only, n) {
			only = append(only, n)
		}
	}
	sc.only = only
	return sc
}

// argSelected is the argument e reads: action.args.NAME or action.args["NAME"].
func argSelected(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		if e.AsSelect().IsTestOnly() {
			return "", false // has(): a test that never fails
		}
		return argSelectOf(e.AsSelect())
	case celast.CallKind:
		call := e.AsCall()
		if call.FunctionName() == operators.Index && len(call.Args()) == 2 && isActionIdentField(call.Args()[0], "args") {
			return stringLiteral(call.Args()[1])
		}
	}
	return "", false
}

func argSelectOf(sel celast.SelectExpr) (string, bool) {
	return sel.FieldName(), isActionIdentField(sel.Operand(), "args")
}

// isActionIdentField says whether e is action.FIELD.
func isActionIdentField(e celast.Expr, field string) bool {
	if e.Kind() != celast.SelectKind {
		return false
	}
	sel := e.AsSelect()
	return sel.FieldName() == field && !sel.IsTestOnly() &&
		sel.Operand().Kind() == celast.IdentKind && sel.Operand().AsIdent() == "action"
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// children are the expressions e is made of.
func children(e celast.Expr) []celast.Expr {
	switch e.Kind() {
	case celast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			return append([]celast.Expr{call.Target()}, call.Args()...)
		}
		return call.Args()
	case celast.SelectKind:
		return []celast.Expr{e.AsSelect().Operand()}
	case celast.ListKind:
		return e.AsList().Elements()
	case celast.MapKind:
		var out []celast.Expr
		for _, en := range e.AsMap().Entries() {
			out = append(out, en.AsMapEntry().Key(), en.AsMapEntry().Value())
		}
		return out
	case celast.StructKind:
		var out []celast.Expr
		for _, f := range e.AsStruct().Fields() {
			out = append(out, f.AsStructField().Value())
		}
		return out
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		return []celast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()}
	}
	return nil
}

func compileCondition(env *cel.Env, expr string) (cel.Program, conditionShape, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, conditionShape{}, errors.New(`empty condition (write "true" for a rule that always applies)`)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, conditionShape{}, celIssues(iss)
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		// dyn is refused too: a rule that is not a bool at evaluation would only
		// fail then, while an action waits.
		hint := ""
		if t.IsExactType(cel.DynType) {
			hint = " (compare explicitly, e.g. action.args.flag == true)"
		}
		return nil, conditionShape{}, fmt.Errorf("condition is of type %s, want bool%s", cel.FormatCELType(t), hint)
	}
	prg, err := env.Program(ast,
		cel.CostLimit(CostLimit),
		// So that a cancelled context stops a long comprehension too.
		cel.InterruptCheckFrequency(100),
	)
	if err != nil {
		return nil, conditionShape{}, fmt.Errorf("condition: %w", err)
	}
	return prg, shapeOf(ast), nil
}

// celIssues renders CEL's compile errors one per clause, without the source
// snippet lines, so that a config error fits on one line.
func celIssues(iss *cel.Issues) error {
	var msgs []string
	for _, e := range iss.Errors() {
		msg := strings.TrimSuffix(e.Message, " (in container '')")
		if strings.HasPrefix(msg, "undefined field ") {
			msg += celFieldsHint
		}
		msgs = append(msgs, fmt.Sprintf("ERROR: <input>:%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg))
	}
	if len(msgs) == 0 {
		return iss.Err()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Revision names this version of the policy; it is part of every fingerprint,
// so a policy change makes old approval buttons stale.
func (p *Policy) Revision() string { return p.revision }

// Rules returns a copy of the rules, in order.
func (p *Policy) Rules() []Rule {
	out := slices.Clone(p.rules)
	for i := range out {
		if a := out[i].Approval; a != nil {
			copied := *a
			out[i].Approval = &copied
		}
		out[i].Notify = slices.Clone(out[i].Notify)
		out[i].Remind = slices.Clone(out[i].Remind)
		out[i].Escalate = cloneSteps(out[i].Escalate)
		out[i].Window = cloneWindow(out[i].Window)
		out[i].BreakGlass = cloneBreakGlass(out[i].BreakGlass)
	}
	return out
}

// Evaluate returns the outcome of the first rule whose condition holds for
// in.Action. It fails closed: an error evaluating any rule before a match, or
// no match at all (ErrNoRuleMatched), is an error and never "no approval".
func (p *Policy) Evaluate(ctx context.Context, in Input) (Outcome, error) {
	vars, err := policyVars(in)
	if err != nil {
		return Outcome{}, fmt.Errorf("policy %s: action %s: %w", p.revision, in.Action.Name, err)
	}
	for i, prg := range p.programs {
		if err := ctx.Err(); err != nil {
			return Outcome{}, fmt.Errorf("policy %s: %w", p.revision, err)
		}
		r := p.rules[i]
		val, _, err := prg.ContextEval(ctx, vars)
		if err != nil {
			return Outcome{}, fmt.Errorf("policy %s: rule %q on action %s: %w", p.revision, r.Name, in.Action.Name, err)
		}
		match, ok := val.(types.Bool)
		if !ok {
			return Outcome{}, fmt.Errorf("policy %s: rule %q on action %s: condition gave %v, want bool", p.revision, r.Name, in.Action.Name, val)
		}
		if !match {
			continue
		}
		out := Outcome{Rule: r.Name, Risk: r.Risk, Notify: slices.Clone(r.Notify), Remind: slices.Clone(r.Remind), Escalate: cloneSteps(r.Escalate), Window: cloneWindow(r.Window), BreakGlass: cloneBreakGlass(r.BreakGlass)}
		if r.Approval != nil {
			copied := *r.Approval
			out.Approval = &copied
		}
		return out, nil
	}
	return Outcome{}, fmt.Errorf("policy %s: action %s: %w", p.revision, in.Action.Name, ErrNoRuleMatched)
}

// policyVars decodes the input's JSON for CEL. Arguments must be one object
// (empty means {}); duplicate keys are refused rather than guessed at.
func policyVars(in Input) (map[string]any, error) {
	args := map[string]any{}
	if len(strings.TrimSpace(string(in.Action.Args))) > 0 {
		v, err := jsonvalue.Decode(in.Action.Args, jsonvalue.ForCEL)
		if err != nil {
			return nil, fmt.Errorf("decode arguments: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonvalue.Kind(v))
		}
		args = m
	}
	vars := map[string]any{
		"action":    celAction{Name: in.Action.Name, Index: int64(in.Index), Args: args},
		"requester": celRequester{ID: in.Requester.ID, Name: in.Requester.Name, Role: in.RequesterRole},
		"task":      in.TaskID,
	}
	if !in.EvidenceCanonical {
		evidence, err := decodeEvidence(in.Evidence)
		if err != nil {
			return nil, err
		}
		vars["evidence"], vars["mcp"] = evidence, mcpVars(in.Action.Name, evidence)
		return vars, nil
	}
	// Canonical evidence decodes: CEL asks for it (a func in the bindings)
	// only if a rule reads it, and most rules do not, so the evidence, most
	// of a proposal's bytes, is decoded once at most and usually never.
	var (
		evidence []celEvidence
		decoded  error
		done     bool
	)
	decode := func() error {
		if !done {
			evidence, decoded = decodeEvidence(in.Evidence)
			done = true
		}
		return decoded
	}
	vars["evidence"] = func() any {
		if err := decode(); err != nil {
			return types.NewErr("%v", err)
		}
		return evidence
	}
	vars["mcp"] = func() any {
		if !strings.HasPrefix(in.Action.Name, MCPActionPrefix) {
			return mcpVars(in.Action.Name, nil)
		}
		if err := decode(); err != nil {
			return types.NewErr("%v", err)
		}
		return mcpVars(in.Action.Name, evidence)
	}
	return vars, nil
}

// decodeEvidence decodes each piece of evidence's data for CEL.
func decodeEvidence(in []record.Evidence) ([]celEvidence, error) {
	evidence := make([]celEvidence, len(in))
	for i, e := range in {
		var data any
		if len(strings.TrimSpace(string(e.Data))) > 0 {
			v, err := jsonvalue.Decode(e.Data, jsonvalue.ForCEL)
			if err != nil {
				return nil, fmt.Errorf("decode evidence %d (%s): %w", i, e.Source, err)
			}
			data = v
		}
		evidence[i] = celEvidence{Source: e.Source, Data: data}
	}
	return evidence, nil
}

// checkRemind refuses a reminder a rule cannot keep (none without an
// approval, each positive and shorter than its expiry) and returns the
// offsets longest first, without repeats.
func checkRemind(remind []record.Seconds, a *record.ApprovalSpec) ([]record.Seconds, error) {
	if len(remind) == 0 {
		return nil, nil
	}
	if a == nil {
		return nil, errors.New("a rule without an approval has no deadline to remind of")
	}
	out := slices.Clone(remind)
	for _, d := range out {
		if d < 1 {
			return nil, errors.New("each reminder must be at least 1s before the deadline")
		}
		if d >= a.Expires {
			return nil, fmt.Errorf("a reminder %s before the deadline is not shorter than the approval's expiry (%s)", d.Duration(), a.Expires.Duration())
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	slices.Reverse(out)
	return out, nil
}

// checkEscalate refuses escalation steps a rule cannot keep: none without an
// approval; each after a positive time, later than the one before, sooner
// than the expiry, to a known role or to users, extending by no negative.
func checkEscalate(steps []record.EscalationStep, a *record.ApprovalSpec, roles *Roles) error {
	if len(steps) == 0 {
		return nil
	}
	if a == nil {
		return errors.New("a rule without an approval has nobody to escalate to")
	}
	var prev record.Seconds
	for i, s := range steps {
		switch {
		case s.After < 1 || s.After <= prev:
			return fmt.Errorf("step %d: each step must come at least 1s after the request and after the step before", i)
		case s.After >= a.Expires:
			return fmt.Errorf("step %d: %s after the request is not sooner than the approval's expiry (%s)", i, s.After.Duration(), a.Expires.Duration())
		case s.Extend < 0:
			return fmt.Errorf("step %d: extend must not be negative", i)
		case (s.Role == "") == (len(s.Users) == 0):
			return fmt.Errorf("step %d: name a role or users", i)
		}
		if s.Role != "" && roles != nil {
			if _, ok := roles.Rank(s.Role); !ok {
				return fmt.Errorf("step %d: unknown role %q", i, s.Role)
			}
		}
		prev = s.After
	}
	return nil
}

func cloneSteps(steps []record.EscalationStep) []record.EscalationStep {
	if steps == nil {
		return nil
	}
	out := slices.Clone(steps)
	for i := range out {
		out[i].Users = slices.Clone(out[i].Users)
	}
	return out
}
