// Package stdwebhook is Standard Webhooks 1.0 signing, the one implementation
// behind every signed request signoff sends: the webhook executor's calls and
// the callbacks of runs. A receiver verifies either with the same library.
package stdwebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks 1.0 headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// secretPrefix marks a Standard Webhooks secret: base64 of the key after it.
const secretPrefix = "whsec_"

// ParseSecrets reads the value of the secret variable: one whsec_ secret, or
// several separated by spaces while a key rotates (every one signs, so a
// target that knows either verifies). The error never repeats the value.
func ParseSecrets(value string) ([][]byte, error) {
	fields := strings.Fields(value)
	if len(fields) == 0 {
		return nil, errors.New("empty: want a secret like whsec_<base64>")
	}
	keys := make([][]byte, 0, len(fields))
	for i, f := range fields {
		b64, ok := strings.CutPrefix(f, secretPrefix)
		if !ok {
			return nil, fmt.Errorf("secret %d does not start with %s", i+1, secretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("secret %d is not base64 after %s", i+1, secretPrefix)
		}
		// The specification asks for keys of 24 to 64 bytes; a shorter one is
		// guessable, and libraries refuse a longer one.
		if len(key) < 24 || len(key) > 64 {
			return nil, fmt.Errorf("secret %d is %d bytes; want 24 to 64", i+1, len(key))
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Sign returns the webhook-signature header value for one message: a
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, separated by spaces.
func Sign(keys [][]byte, id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + mac(k, id, ts.Unix(), body)
	}
	return strings.Join(sigs, " ")
}

func mac(key []byte, id string, ts int64, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(ts, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Verify checks a signed message as a target would: the timestamp within
// tolerance of now, and one of the signatures made by one of the keys. It is
// here so that the tests hold the signer to the receiver's rules.
func Verify(keys [][]byte, id, timestamp, signatures string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("bad webhook-timestamp")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook-timestamp too far from now")
	}
	for _, sig := range strings.Fields(signatures) {
		v, got, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		for _, k := range keys {
			if hmac.Equal([]byte(got), []byte(mac(k, id, ts, body))) {
				return nil
			}
		}
	}
	return errors.New("no valid signature")
}

// ParseRetryAfter reads a Retry-After header (seconds or an HTTP date) as a
// wait of at most limit; 0 when absent or unreadable.
func ParseRetryAfter(v string, now time.Time, limit time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int(limit/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), limit)
	}
	return 0
}
