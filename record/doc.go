// Package record holds what signoff keeps about a run, and the words it uses
// for them: runs, checkpoints and their state, approval requests, decisions,
// operations and receipts, outbox messages, audit events and anchors, and the
// typed vocabulary (statuses, events, verdicts, risks, refusal codes, outbox
// kinds), with the errors the edges match (a refusal, a failed integrity
// check).
//
// It imports only the standard library, so that the store contract, the
// drivers and every edge can share these types without pulling in the engine
// or its policy language.
package record
