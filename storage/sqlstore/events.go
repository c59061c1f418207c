package sqlstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/record"
)

// A transition's audit events are stored in its checkpoint's row where the
// dialect keeps them there (RunHeads): the row names the run and the
// checkpoint, and EncodeEvents holds the rest of each event, in order.
//
// Each event is its seq and format (unsigned varints), its actor and action,
// its detail (absent or bytes), its time (a varint of milliseconds), the
// hash before it and its own, its key id and MAC: the strings are
// length-prefixed, so that every byte of each comes back as written, which
// the event's hash covers. A hash or MAC is a SHA-256 in lowercase
// hexadecimal, kept as its 32 bytes (half the size); anything else in its
// place is kept as the string it is.

// EncodeEvents is evs as stored in their checkpoint's row.
func EncodeEvents(evs []*record.AuditEvent) []byte {
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, e := range evs {
		b = binary.AppendUvarint(b, uint64(e.Seq))
		b = binary.AppendUvarint(b, uint64(e.Format))
		str(e.Actor)
		str(string(e.Action))
		if e.Detail == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			str(string(e.Detail))
		}
		b = binary.AppendVarint(b, millis(e.At))
		b = appendDigest(b, e.PrevHash)
		b = appendDigest(b, e.Hash)
		str(e.KeyID)
		b = appendDigest(b, e.MAC)
	}
	return b
}

// Digest fields: a tag byte, then 32 bytes (digestBytes), or a
// length-prefixed string (digestString).
const (
	digestString byte = 0
	digestBytes  byte = 1
)

// appendDigest appends s, a hash or MAC field: as its 32 bytes when it is
// 64 lowercase hexadecimal digits, which decode back to the same text.
func appendDigest(b []byte, s string) []byte {
	if len(s) == 2*sha256.Size && s == strings.ToLower(s) {
		if raw, err := hex.DecodeString(s); err == nil {
			return append(append(b, digestBytes), raw...)
		}
	}
	b = append(b, digestString)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errEvents is a checkpoint row's events that do not decode.
var errEvents = errors.New("the checkpoint's audit events do not decode")

// DecodeEvents is the events EncodeEvents stored in the row of checkpoint
// seq (hash cpHash) of run runID; anything but whole events is an error.
func DecodeEvents(runID string, cpSeq int64, cpHash string, b []byte) ([]*record.AuditEvent, error) {
	d := eventDecoder{b: b}
	var out []*record.AuditEvent
	for len(d.b) > 0 {
		e := &record.AuditEvent{RunID: runID, CheckpointSeq: cpSeq, CheckpointHash: cpHash}
		seq, format := d.uvarint(), d.uvarint()
		e.Actor, e.Action = d.str(), record.Event(d.str())
		switch d.byte() {
		case 0:
		case 1:
			e.Detail = []byte(d.str())
		default:
			d.err = true
		}
		at := d.varint()
		e.PrevHash, e.Hash = d.digest(), d.digest()
		e.KeyID, e.MAC = d.str(), d.digest()
		if d.err || seq == 0 || seq > 1<<62 || format > 1<<16 {
			return nil, fmt.Errorf("run %s, checkpoint %d: %w", runID, cpSeq, errEvents)
		}
		e.Seq, e.Format, e.At = int64(seq), int(format), fromMillis(at)
		out = append(out, e)
	}
	return out, nil
}

// eventDecoder reads EncodeEvents' fields; a field that runs past the end
// sets err, and what it returns is then zero.
type eventDecoder struct {
	b   []byte
	err bool
}

func (d *eventDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) byte() byte {
	if len(d.b) == 0 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// digest reads appendDigest's field.
func (d *eventDecoder) digest() string {
	switch d.byte() {
	case digestString:
		return d.str()
	case digestBytes:
		if len(d.b) < sha256.Size {
			d.err, d.b = true, nil
			return ""
		}
		s := hex.EncodeToString(d.b[:sha256.Size])
		d.b = d.b[sha256.Size:]
		return s
	}
	d.err = true
	return ""
}

func (d *eventDecoder) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err, d.b = true, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// lastSeq is the seq of the last of evs, 0 for none.
func lastSeq(evs []*record.AuditEvent) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// checkpointEventColumns select a checkpoint row's events with what names
// them (see scanCheckpointEvents).
const checkpointEventColumns = `run_id, seq, hash, events, last_event_seq`

// scanCheckpointEvents reads the events of one checkpoint row. A row whose
// events do not decode, or whose last is not at the seq the row is found
// by, gives one event in their place, at that seq, that no hash matches:
// the damage is the verifier's to report, beside the rest of the log.
func scanCheckpointEvents(s Row) ([]*record.AuditEvent, error) {
	var (
		runID, hash string
		seq, last   int64
		b           []byte
	)
	if err := s.Scan(&runID, &seq, &hash, &b, &last); err != nil {
		return nil, err
	}
	evs, err := DecodeEvents(runID, seq, hash, b)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Seq != last {
		return []*record.AuditEvent{{Seq: last, Format: record.AuditPerRun, RunID: runID, CheckpointSeq: seq, CheckpointHash: hash}}, nil
	}
	return evs, nil
}

// eventsOfCheckpoints adds to *out the events of the checkpoint rows that
// Rows reads, in row order.
func eventsOfCheckpoints(out *[]*record.AuditEvent) func(Rows) error {
	return func(rows Rows) error {
		for rows.Next() {
			evs, err := scanCheckpointEvents(rows)
			if err != nil {
				return err
			}
			*out = append(*out, evs...)
		}
		return rows.Err()
	}
}

// mergeBySeq is a and b, each ordered by seq (descending when newest),
// as one list in that order.
func mergeBySeq(a, b []*record.AuditEvent, newest bool) []*record.AuditEvent {
	out := make([]*record.AuditEvent, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if (a[0].Seq < b[0].Seq) != newest {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
