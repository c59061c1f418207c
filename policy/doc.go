// Package policy decides what a proposal may do and who must agree first:
// the rules (CEL conditions over the action, its arguments and who asks),
// each action's argument spec (a JSON Schema, the fields hidden from people,
// look-alike keys refused), the roles approvers hold, and the fingerprint an
// approval binds to.
//
// It is the only package that imports cel-go and jsonschema, and it knows
// nothing of runs, stores or Slack: the engine asks it, and the CLI's
// `policy explain` and `config check` read it.
package policy
