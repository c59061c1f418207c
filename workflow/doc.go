// Package workflow is the domain of signoff and its durable run engine.
//
// A run moves through steps and actions. A step reads and decides (it looks things
// up, asks a model, writes evidence and may propose actions) and never changes the
// outside world, so re-running one after a crash is harmless. An action is the only
// way to change the world; the engine runs it, never a step, and only after policy
// has allowed it or the people policy names have approved its fingerprint.
//
// # State machine
//
//	running ──steps──► proposed ──checks──► failed
//	                           └─policy──► executing | scheduled | waiting_approval
//	waiting_approval ─approve─► executing ─receipts─► done
//	                 ─approve, window closed─► scheduled
//	                 ─reject──► rejected
//	                 ─deadline► expired
//	                 ─cancel──► cancelled
//	executing ─window closed, nothing sent yet─► scheduled ─window open─► executing
//	scheduled ─cancel──► cancelled
//	executing ─refused or unprovable─► needs_attention
//	any state whose stored data fails its integrity check ─► needs_attention
//
// # Guarantees
//
//   - A transition, its checkpoint and its audit event commit in one transaction
//     (Store.Update). Nothing that matters lives only in a process.
//   - Every state change is a compare-and-set on a version; zero rows changed is
//     ErrConflict, never ignored.
//   - Intent before effect, receipt after effect: an operation is recorded as
//     pending before the executor is called with its idempotency key, and a
//     pending operation found on resume is reconciled with the target (Lookup),
//     never sent with a new key.
//   - An Executor classifies its failures (Permanent: refused, nothing
//     happened; Transient, or RetryAfter with the target's wait: nothing
//     happened, try again; anything else: unknown, so Lookup is asked first).
//     A CallExecutor also gets the run, the fingerprint, the approvers and the
//     attempt with each call.
//   - Execution uses the stored arguments, whose fingerprint is recomputed and
//     compared with the approved one right before the call.
//   - Checkpoints are hash chained and decoded strictly; a damaged run stops in
//     needs_attention with the reason, and other runs carry on.
//
// # Errors
//
//	storage.ErrNotFound  the record does not exist
//	storage.ErrConflict  a compare-and-set lost: someone else changed the record first
//	storage.ErrDuplicate a unique key exists already
//	*RefusedError        the engine refused a request; nothing changed but the audit log
//	*IntegrityError      stored data failed a check; the run is put in needs_attention
//
// # Layout
//
// The records and their vocabulary are package record, the store contract
// package storage, the rules, argument schemas, roles and fingerprints
// package policy: this package is the engine that puts them to work, and the
// only holder of the store (the edges use its methods and services: Outbox,
// Replays, Backlog, AuditEvents). Within it each concern is one type with its
// dependencies named (the gatekeeper, the decider, the resolver); its
// machinery is in packages of workflow/internal, each owning one type: the
// run transaction (runtx), the execution of approved operations (execute),
// the checkpoint chain (chain), sealing (seal) and the store-wide
// verification (verify).
package workflow
