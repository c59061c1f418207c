// Package jsonvalue reads JSON the way signoff must: exactly one value,
// duplicate keys and invalid UTF-8 refused, numbers kept as the text they
// came with (or as CEL wants them), errors worded for people; and it gives
// the RFC 8785 canonical form and digest that fingerprints and idempotency
// keys are made of.
//
// The engine and policy share it; it is a leaf beside the records.
package jsonvalue
