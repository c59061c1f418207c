package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A checkpoint written against a base (Checkpoint.BaseSeq) stores only the
// top-level members of its state whose encoding differs from the base's,
// schema_version always, and under unsetMember the names of the base's
// members it no longer has. The base holds a whole state, so any checkpoint
// is resolved from at most two rows: a listing reads a run's head and its
// base in one query, and a run's evidence, messages and proposal, which
// rarely change after they are proposed, are stored once, in the base.
//
// The engine writes a new base (a whole state) when the changes since the
// current one would no longer save at least half of the state.

// unsetMember names, in a checkpoint written against a base, the base's
// members that its state lacks. No State field has this name.
const unsetMember = "$unset"

// member is one top-level member of an encoded JSON object, its value the
// bytes as encoded.
type member struct {
	name  string
	value []byte
}

// members splits an encoded JSON object into its top-level members, in
// order. Duplicate names, anything but an object and trailing data are
// errors. The values are slices of b.
func members(b []byte) ([]member, error) {
	d := jsontext.NewDecoder(bytes.NewReader(b))
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("a state is a JSON object, not %s", tok.Kind())
	}
	var out []member
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		end := d.InputOffset()
		out = append(out, member{name: name, value: b[end-int64(len(v)) : end]})
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the state")
	}
	return out, nil
}

// appendMember appends "name":value to an object being written, after a
// comma unless it is the object's first member.
func appendMember(out []byte, name string, value []byte) ([]byte, error) {
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	out, err := jsontext.AppendQuote(out, name)
	if err != nil {
		return nil, err
	}
	out = append(out, ':')
	return append(out, value...), nil
}

// stateBase is the checkpoint the engine writes the next checkpoint of a run
// against: its seq and its whole state.
type stateBase struct {
	seq   int64
	state []byte
	mems  []member // state's members, split when first needed
}

// delta is full (a whole encoded state) written against b, and whether it
// is worth writing: when it is not at most half of full, a new base is.
func (b *stateBase) delta(full []byte) ([]byte, bool, error) {
	if b.mems == nil {
		mems, err := members(b.state)
		if err != nil {
			return nil, false, fmt.Errorf("base checkpoint %d: %w", b.seq, err)
		}
		b.mems = mems
	}
	fm, err := members(full)
	if err != nil {
		return nil, false, err
	}
	inBase := make(map[string][]byte, len(b.mems))
	for _, m := range b.mems {
		inBase[m.name] = m.value
	}
	out := make([]byte, 1, 256)
	out[0] = '{'
	have := make(map[string]bool, len(fm))
	for _, m := range fm {
		have[m.name] = true
		if v, ok := inBase[m.name]; ok && bytes.Equal(v, m.value) && m.name != "schema_version" {
			continue
		}
		if out, err = appendMember(out, m.name, m.value); err != nil {
			return nil, false, err
		}
	}
	var unset []string
	for _, m := range b.mems {
		if !have[m.name] {
			unset = append(unset, m.name)
		}
	}
	if len(unset) > 0 {
		names, err := jsonv2.Marshal(unset)
		if err != nil {
			return nil, false, err
		}
		if out, err = appendMember(out, unsetMember, names); err != nil {
			return nil, false, err
		}
	}
	out = append(out, '}')
	return out, 2*len(out) <= len(full), nil
}

// applyDelta is the whole state that delta, written against a base whose
// members are base, stands for: the base's members in their order with
// delta's values, without those delta unsets, then delta's new members.
func applyDelta(base []member, delta []byte) ([]byte, error) {
	dm, err := members(delta)
	if err != nil {
		return nil, err
	}
	set := make(map[string][]byte, len(dm))
	var unset []string
	for _, m := range dm {
		if m.name == unsetMember {
			if err := jsonv2.Unmarshal(m.value, &unset, jsonv2.RejectUnknownMembers(true)); err != nil || len(unset) == 0 {
				return nil, fmt.Errorf("%s is not a list of names", unsetMember)
			}
			continue
		}
		set[m.name] = m.value
	}
	inBase := make(map[string]bool, len(base))
	for _, m := range base {
		inBase[m.name] = true
	}
	gone := make(map[string]bool, len(unset))
	for _, name := range unset {
		switch {
		case gone[name]:
			return nil, fmt.Errorf("%s names %q twice", unsetMember, name)
		case !inBase[name]:
			return nil, fmt.Errorf("%s names %q, which the base does not have", unsetMember, name)
		case set[name] != nil:
			return nil, fmt.Errorf("%q is both set and unset", name)
		}
		gone[name] = true
	}
	out := make([]byte, 1, len(delta)+len(base)*64)
	out[0] = '{'
	for _, m := range base {
		if gone[m.name] {
			continue
		}
		v := m.value
		if d, ok := set[m.name]; ok {
			v = d
		}
		if out, err = appendMember(out, m.name, v); err != nil {
			return nil, err
		}
	}
	for _, m := range dm {
		if m.name == unsetMember || inBase[m.name] {
			continue
		}
		if out, err = appendMember(out, m.name, m.value); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// ResolveState is the whole encoded state of cps[i], where cps are a run's
// checkpoints by seq (as Tx.Checkpoints lists them): its State, or, when it
// was written against a base, its changes applied to the base's state. It
// checks no hash: VerifyChain does.
func ResolveState(cps []*Checkpoint, i int) ([]byte, error) {
	c := cps[i]
	if c.BaseSeq == 0 {
		return c.State, nil
	}
	var base *Checkpoint
	if j := c.BaseSeq - 1; j >= 0 && j < int64(len(cps)) && cps[j].Seq == c.BaseSeq {
		base = cps[j]
	}
	return resolveWith(c, base)
}

// resolveWith is ResolveState of c given its base (nil when it is missing).
func resolveWith(c, base *Checkpoint) ([]byte, error) {
	switch {
	case c.BaseSeq == 0:
		return c.State, nil
	case c.SchemaVersion < 2:
		return nil, fmt.Errorf("a checkpoint of schema version %d has a base (%d)", c.SchemaVersion, c.BaseSeq)
	case c.BaseSeq >= c.Seq:
		return nil, fmt.Errorf("its base %d is not an earlier checkpoint", c.BaseSeq)
	case c.State == nil:
		return nil, errors.New("its state was removed")
	case base == nil || base.Seq != c.BaseSeq || base.RunID != c.RunID:
		return nil, fmt.Errorf("its base checkpoint %d is missing", c.BaseSeq)
	case !base.PrunedAt.IsZero() || base.State == nil:
		return nil, fmt.Errorf("its base checkpoint %d has lost its state", c.BaseSeq)
	case base.BaseSeq != 0:
		return nil, fmt.Errorf("its base checkpoint %d is written against a base itself", c.BaseSeq)
	}
	mems, err := members(base.State)
	if err != nil {
		return nil, fmt.Errorf("base checkpoint %d: %w", c.BaseSeq, err)
	}
	full, err := applyDelta(mems, c.State)
	if err != nil {
		return nil, fmt.Errorf("changes since checkpoint %d: %w", c.BaseSeq, err)
	}
	return full, nil
}
