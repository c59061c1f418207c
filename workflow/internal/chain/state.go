package chain

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/signoff-dev/signoff/record"
)

// Encode encodes st for a checkpoint.
func Encode(st *record.State) ([]byte, error) {
	b, err := jsonv2.Marshal(st, jsonv2.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("encode state of run %s: %w", st.RunID, err)
	}
	return b, nil
}

// Decode decodes a checkpoint's state strictly: unknown fields, duplicate
// keys, trailing data and a schema version from the future are errors.
func Decode(b []byte) (*record.State, error) {
	var st record.State
	if err := jsonv2.Unmarshal(b, &st, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("decode state: %w", err)
	}
	if st.SchemaVersion > record.SchemaVersion {
		return nil, fmt.Errorf("decode state: schema version %d is newer than this build (%d)", st.SchemaVersion, record.SchemaVersion)
	}
	if st.SchemaVersion < 1 {
		return nil, fmt.Errorf("decode state: missing or invalid schema version %d", st.SchemaVersion)
	}
	if !st.Status.Valid() {
		return nil, fmt.Errorf("decode state: unknown status %q", st.Status)
	}
	return &st, nil
}
