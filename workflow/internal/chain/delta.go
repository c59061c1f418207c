package chain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/signoff-dev/signoff/record"
)

// A checkpoint written against a base (Checkpoint.BaseSeq) stores only the
// top-level members of its state whose encoding differs from the base's,
// schema_version always, under unsetMember the names of the base's members
// it no longer has, and under appendMember, for a list that only grew (the
// agent's messages, its evidence), the elements added since the base. The base holds a whole state, so any checkpoint
// is resolved from at most two rows: a listing reads a run's head and its
// base in one query, and a run's evidence, messages and proposal, which
// rarely change after they are proposed, are stored once, in the base.
//
// The engine writes a new base (a whole state) when the changes since the
// current one would no longer save at least half of the state.

// unsetMember names, in a checkpoint written against a base, the base's
// members that its state lacks. No State field has this name.
const unsetMember = "$unset"

// appendMember holds, in a checkpoint written against a base, the elements
// each list gained since the base, by member name.
const appendMember = "$append"

// member is one top-level member of an encoded JSON object, its value the
// bytes as encoded.
type member struct {
	name  string
	value []byte
}

// members splits an encoded JSON object into its top-level members, in
// order. Duplicate names, anything but an object and trailing data are
// errors (unless opts allow them). The values are slices of b.
func members(b []byte, opts ...jsontext.Options) ([]member, error) {
	// From a bytes.Buffer the decoder reads b in place instead of copying it.
	d := jsontext.NewDecoder(bytes.NewBuffer(b), opts...)
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("a state is a JSON object, not %s", tok.Kind())
	}
	var out []member
	for d.PeekKind() != '}' {
		raw, err := d.ReadValue() // the name, quoted
		if err != nil {
			return nil, err
		}
		name, err := memberName(raw)
		if err != nil {
			return nil, err
		}
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

// stateNames are the names of a state's members (and of a delta's own):
// members gives these strings instead of allocating each name it reads,
// a few dozen on every split of a state.
var stateNames = func() map[string]string {
	names := map[string]string{unsetMember: unsetMember, appendMember: appendMember}
	t := reflect.TypeFor[record.State]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = name
		}
	}
	return names
}()

// memberName is the name a member's quoted name raw says.
func memberName(raw []byte) (string, error) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		if name, ok := stateNames[string(raw[1:len(raw)-1])]; ok {
			return name, nil
		}
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// addMember appends "name":value to an object being written, after a
// comma unless it is the object's first member.
func addMember(out []byte, name string, value []byte) ([]byte, error) {
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

// ownEncoding reads a state Encode has just made: its names are unique and
// its strings valid UTF-8 by construction, so checking them again is work
// for nothing (a third of splitting a state with 2 KB of evidence).
var ownEncoding = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// Base is the checkpoint the engine writes the next checkpoint of a run
// against: its seq and its whole state.
type Base struct {
	Seq   int64
	State []byte
	mems  []member          // State's members, split when first needed
	index map[string][]byte // mems by name
}

// Delta is full (a whole encoded state) written against b, and whether it
// is worth writing: when it is not at most half of full, a new base is.
func (b *Base) Delta(full []byte) ([]byte, bool, error) {
	if b.mems == nil {
		mems, err := members(b.State)
		if err != nil {
			return nil, false, fmt.Errorf("base checkpoint %d: %w", b.Seq, err)
		}
		b.mems = mems
		b.index = make(map[string][]byte, len(mems))
		for _, m := range mems {
			b.index[m.name] = m.value
		}
	}
	fm, err := members(full, ownEncoding...)
	if err != nil {
		return nil, false, err
	}
	out := make([]byte, 1, 256)
	out[0] = '{'
	have := make(map[string]bool, len(fm))
	grown := []byte{'{'}
	for _, m := range fm {
		have[m.name] = true
		v, ok := b.index[m.name]
		if ok && bytes.Equal(v, m.value) && m.name != "schema_version" {
			continue
		}
		if tail := addedTo(v, m.value); ok && tail != nil {
			if grown, err = addMember(grown, m.name, tail); err != nil {
				return nil, false, err
			}
			continue
		}
		if out, err = addMember(out, m.name, m.value); err != nil {
			return nil, false, err
		}
	}
	if len(grown) > 1 {
		if out, err = addMember(out, appendMember, append(grown, '}')); err != nil {
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
		if out, err = addMember(out, unsetMember, names); err != nil {
			return nil, false, err
		}
	}
	out = append(out, '}')
	return out, 2*len(out) <= len(full), nil
}

// addedTo is, when list is the encoding of a non-empty JSON list and grown
// that of the same list with elements added at its end, the encoding of a
// list of those elements; nil otherwise. The encoding is deterministic, so
// the elements list holds are the bytes that begin grown, up to its
// closing bracket, followed by a comma.
func addedTo(list, grown []byte) []byte {
	n := len(list)
	if n < 3 || list[0] != '[' || list[n-1] != ']' || len(grown) <= n ||
		!bytes.Equal(grown[:n-1], list[:n-1]) || grown[n-1] != ',' {
		return nil
	}
	return append([]byte{'['}, grown[n:]...)
}

// applyDelta is the whole state that delta, written against a base whose
// members are base, stands for: the base's members in their order with
// delta's values (or with the elements it appends), without those delta
// unsets, then delta's new members.
func applyDelta(base []member, delta []byte) ([]byte, error) {
	dm, err := members(delta)
	if err != nil {
		return nil, err
	}
	set, unset, grown, err := splitDelta(dm)
	if err != nil {
		return nil, err
	}
	inBase := make(map[string][]byte, len(base))
	for _, m := range base {
		inBase[m.name] = m.value
	}
	if err := appendGrown(set, inBase, grown); err != nil {
		return nil, err
	}
	gone, err := unsetNames(unset, inBase, set)
	if err != nil {
		return nil, err
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
		if out, err = addMember(out, m.name, v); err != nil {
			return nil, err
		}
	}
	for _, m := range dm {
		if m.name == unsetMember || m.name == appendMember || inBase[m.name] != nil {
			continue
		}
		if out, err = addMember(out, m.name, m.value); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// splitDelta sorts the members of a delta into the values it sets, by name,
// the names it unsets and the lists it appends to.
func splitDelta(dm []member) (set map[string][]byte, unset []string, grown []member, err error) {
	set = make(map[string][]byte, len(dm))
	for _, m := range dm {
		switch m.name {
		case unsetMember:
			if err := jsonv2.Unmarshal(m.value, &unset, jsonv2.RejectUnknownMembers(true)); err != nil || len(unset) == 0 {
				return nil, nil, nil, fmt.Errorf("%s is not a list of names", unsetMember)
			}
		case appendMember:
			if grown, err = members(m.value); err != nil || len(grown) == 0 {
				return nil, nil, nil, fmt.Errorf("%s is not an object of lists", appendMember)
			}
		default:
			set[m.name] = m.value
		}
	}
	return set, unset, grown, nil
}

// appendGrown sets, for each list the delta appends to, the base's list
// with the elements appended. A list the delta also sets, or that the base
// does not have as a list, is an error.
func appendGrown(set, inBase map[string][]byte, grown []member) error {
	for _, g := range grown {
		list, n := inBase[g.name], len(inBase[g.name])
		switch {
		case set[g.name] != nil:
			return fmt.Errorf("%q is both set and appended to", g.name)
		case n < 3 || list[0] != '[' || list[n-1] != ']':
			return fmt.Errorf("%s names %q, which the base does not have as a list", appendMember, g.name)
		case len(g.value) < 3 || g.value[0] != '[' || g.value[len(g.value)-1] != ']':
			return fmt.Errorf("%s of %q is not a list of elements", appendMember, g.name)
		}
		set[g.name] = append(append(append([]byte{}, list[:n-1]...), ','), g.value[1:]...)
	}
	return nil
}

// unsetNames is the set of the names a delta unsets, each of which must be
// named once, be the base's, and not be set too.
func unsetNames(unset []string, inBase, set map[string][]byte) (map[string]bool, error) {
	gone := make(map[string]bool, len(unset))
	for _, name := range unset {
		switch {
		case gone[name]:
			return nil, fmt.Errorf("%s names %q twice", unsetMember, name)
		case inBase[name] == nil:
			return nil, fmt.Errorf("%s names %q, which the base does not have", unsetMember, name)
		case set[name] != nil:
			return nil, fmt.Errorf("%q is both set and unset", name)
		}
		gone[name] = true
	}
	return gone, nil
}

// Resolve is the whole encoded state of cps[i], where cps are a run's
// checkpoints by seq (as Tx.Checkpoints lists them): its State, or, when it
// was written against a base, its changes applied to the base's state. It
// checks no hash: Verify does.
func Resolve(cps []*record.Checkpoint, i int) ([]byte, error) {
	c := cps[i]
	if c.BaseSeq == 0 {
		return c.State, nil
	}
	var base *record.Checkpoint
	if j := c.BaseSeq - 1; j >= 0 && j < int64(len(cps)) && cps[j].Seq == c.BaseSeq {
		base = cps[j]
	}
	return ResolveWith(c, base)
}

// ResolveWith is Resolve of c given its base (nil when it is missing).
func ResolveWith(c, base *record.Checkpoint) ([]byte, error) {
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
