// Package api is signoff's agent-facing HTTP API under /v1: submit a
// proposal, read and list runs, wait for a run to move, cancel it.
//
// The contract is openapi.yaml, embedded and served at /v1/openapi.yaml. The
// routes, parameters and answer types are generated from it by oapi-codegen
// (echo strict server; go generate ./api/...), so a handler that answers
// something the document does not describe does not compile, and a
// conformance test holds every answer to the document with kin-openapi.
//
// Every request but the document's carries a bearer token configured by its
// SHA-256 (config.APIToken); the token decides the requester and what the
// caller may do, and it sees only its requester's runs (another's is answered
// as a run that does not exist). Every refusal is RFC 9457 problem+json with a stable code
// and changes nothing.
package api

import _ "embed"

// Spec is the OpenAPI document the API implements.
//
//go:embed openapi.yaml
var Spec []byte
