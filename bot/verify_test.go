package bot

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Published Slack signature vectors (Slack's docs, slack-go, slack-morphism,
// a third-party test), with the clock pinned to each vector's timestamp.
var signatureVectors = []struct {
	name, secret, ts, body, sig string
	want                        error
}{
	{
		name:   "slack docs slash command",
		secret: "8f742231b10e8888abcd99yyyzzz85a5", ts: "1531420618",
		body: "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
		sig:  "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
	},
	{
		name:   "slack docs body tampered",
		secret: "8f742231b10e8888abcd99yyyzzz85a5", ts: "1531420618",
		body: "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c------",
		sig:  "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
		want: ErrSignatureInvalid,
	},
	{
		name:   "slack-go app mention",
		secret: "e6b19c573432dcc6b075501d51b51bb8", ts: "1531431954",
		body: `{"token":"aF5ynEYQH0dFN9imlgcADxDB","team_id":"XXXXXXXXX","api_app_id":"YYYYYYYYY","event":{"type":"app_mention","user":"AAAAAAAAA","text":"<@EEEEEEEEE> hello world","client_msg_id":"477cc591-ch73-a14z-4db8-g0cd76321bec","ts":"1531431954.000073","channel":"TTTTTTTTT","event_ts":"1531431954.000073"},"type":"event_callback","event_id":"TvBP7LRED7","event_time":1531431954,"authed_users":["EEEEEEEEE"]}`,
		sig:  "v0=adada4ed31709aef585c2580ca3267678c6a8eaeb7e0c1aca3ee57b656886b2c",
	},
	{
		name:   "slack-go wrong secret",
		secret: "e6b19c573432dcc6b075501d51b51boo", ts: "1531431954",
		body: `{"token":"aF5ynEYQH0dFN9imlgcADxDB","team_id":"XXXXXXXXX","api_app_id":"YYYYYYYYY","event":{"type":"app_mention","user":"AAAAAAAAA","text":"<@EEEEEEEEE> hello world","client_msg_id":"477cc591-ch73-a14z-4db8-g0cd76321bec","ts":"1531431954.000073","channel":"TTTTTTTTT","event_ts":"1531431954.000073"},"type":"event_callback","event_id":"TvBP7LRED7","event_time":1531431954,"authed_users":["EEEEEEEEE"]}`,
		sig:  "v0=adada4ed31709aef585c2580ca3267678c6a8eaeb7e0c1aca3ee57b656886b2c",
		want: ErrSignatureInvalid,
	},
	{
		name:   "slack-go wrong body",
		secret: "e6b19c573432dcc6b075501d51b51bb8", ts: "1531431954",
		body: `{"token":"12345678abcdefghlmnopqrs","team_id":"XXXXXXXXX","api_app_id":"YYYYYYYYY","event":{"type":"app_mention","user":"AAAAAAAAA","text":"<@EEEEEEEEE> hello world","client_msg_id":"477cc591-ch73-a14z-4db8-g0cd76321bec","ts":"1531431954.000073","channel":"TTTTTTTTT","event_ts":"1531431954.000073"},"type":"event_callback","event_id":"TvBP7LRED7","event_time":1531431954,"authed_users":["EEEEEEEEE"]}`,
		sig:  "v0=adada4ed31709aef585c2580ca3267678c6a8eaeb7e0c1aca3ee57b656886b2c",
		want: ErrSignatureInvalid,
	},
	{
		name:   "third-party hello world",
		secret: "the-secret", ts: "1590253817", body: "hello, world!",
		sig: "v0=be81dff716fe0e1d65558f82a5152430fc03e1c1876e60097c7fd337ff7b22ea",
	},
	{
		name:   "slack-morphism precoded",
		secret: "fa2c05deeef5a4077494e89f54394de0", ts: "1531420618", body: "test-body",
		sig: "v0=baa91ef62d346e56607bbdd278a8acd570b91226854f15a382f43d33be42f666",
	},
	{
		// The HMAC is right, over a timestamp that is not a number: refused.
		name:   "slack-morphism non-numeric timestamp",
		secret: "d058b0b8f3f91e4446ad981890c9b6c16b2acc85367e30a2d76b8a95e525c02a", ts: "test-ts", body: "test-body",
		sig:  "v0=37ca0519af8b621f18b13586fc72488ebb159fc730a5d1718dd823dec69dea95",
		want: ErrBadTimestamp,
	},
}

func vectorHeader(sig, ts string) http.Header {
	h := http.Header{}
	if sig != "" {
		h.Set(HeaderSignature, sig)
	}
	if ts != "" {
		h.Set(HeaderTimestamp, ts)
	}
	return h
}

func TestVerifySignaturePublishedVectors(t *testing.T) {
	for _, v := range signatureVectors {
		t.Run(v.name, func(t *testing.T) {
			now := time.Unix(1531420618, 0)
			if secs, err := strconv.ParseInt(v.ts, 10, 64); err == nil {
				now = time.Unix(secs, 0)
			}
			err := VerifySignature(vectorHeader(v.sig, v.ts), []byte(v.body), v.secret, now)
			if !errors.Is(err, v.want) || (v.want == nil) != (err == nil) {
				t.Fatalf("VerifySignature = %v, want %v", err, v.want)
			}
			if v.want == nil {
				secs, _ := strconv.ParseInt(v.ts, 10, 64)
				if got := Sign(v.secret, secs, []byte(v.body)); got != v.sig {
					t.Errorf("Sign = %s, want %s", got, v.sig)
				}
				h := SignedHeader(v.secret, secs, []byte(v.body))
				if h.Get(HeaderSignature) != v.sig || h.Get(HeaderTimestamp) != v.ts || h.Get("Content-Type") != "application/x-www-form-urlencoded" {
					t.Errorf("SignedHeader = %v, want signature %s at %s, as a form", h, v.sig, v.ts)
				}
			}
		})
	}
}

func TestVerifySignatureRefusals(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	v := signatureVectors[0]
	at := time.Unix(1531420618, 0)
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		secret string
		now    time.Time
		want   error
	}{
		{"valid", vectorHeader(v.sig, v.ts), v.body, secret, at, nil},
		{"valid 5 minutes later", vectorHeader(v.sig, v.ts), v.body, secret, at.Add(MaxSkew), nil},
		{"valid 5 minutes before", vectorHeader(v.sig, v.ts), v.body, secret, at.Add(-MaxSkew), nil},
		{"too old", vectorHeader(v.sig, v.ts), v.body, secret, at.Add(MaxSkew + time.Second), ErrTooOld},
		{"in the future", vectorHeader(v.sig, v.ts), v.body, secret, at.Add(-MaxSkew - time.Second), ErrInFuture},
		{"years old", vectorHeader(v.sig, v.ts), v.body, secret, time.Now(), ErrTooOld},
		{"no signature", vectorHeader("", v.ts), v.body, secret, at, ErrMissingHeaders},
		{"no timestamp", vectorHeader(v.sig, ""), v.body, secret, at, ErrMissingHeaders},
		{"no headers", http.Header{}, v.body, secret, at, ErrMissingHeaders},
		{"signed plus sign timestamp", vectorHeader(v.sig, "+1531420618"), v.body, secret, at, ErrBadTimestamp},
		{"negative timestamp", vectorHeader(v.sig, "-1"), v.body, secret, at, ErrBadTimestamp},
		{"huge timestamp", vectorHeader(v.sig, "99999999999999999999"), v.body, secret, at, ErrBadTimestamp},
		{"v1 scheme", vectorHeader("v1="+v.sig[3:], v.ts), v.body, secret, at, ErrSignatureFormat},
		{"short signature", vectorHeader(v.sig[:40], v.ts), v.body, secret, at, ErrSignatureFormat},
		{"not hex", vectorHeader("v0="+string(make([]byte, 64)), v.ts), v.body, secret, at, ErrSignatureFormat},
		{"uppercase hex", vectorHeader("v0=A2114D57B48EAC39B9AD189DD8316235A7B4A8D21A10BD27519666489C69B503", v.ts), v.body, secret, at, nil},
		{"wrong secret", vectorHeader(v.sig, v.ts), v.body, secret + "x", at, ErrSignatureInvalid},
		{"empty body", vectorHeader(v.sig, v.ts), "", secret, at, ErrSignatureInvalid},
		{"timestamp not the signed one", vectorHeader(v.sig, "1531420619"), v.body, secret, at, ErrSignatureInvalid},
		{"no secret configured", vectorHeader(v.sig, v.ts), v.body, "", at, ErrNoSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifySignature(tc.header, []byte(tc.body), tc.secret, tc.now)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("VerifySignature = %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzVerifySignature: never a panic; what Sign signs verifies; a flipped
// byte of the body or the signature never does.
func FuzzVerifySignature(f *testing.F) {
	for _, v := range signatureVectors {
		f.Add(v.secret, []byte(v.body), uint16(7), []byte(v.sig), []byte(v.ts))
	}
	f.Fuzz(func(t *testing.T, secret string, body []byte, flip uint16, rawSig, rawTS []byte) {
		now := time.Unix(1700000000, 0)
		// Arbitrary headers: any answer but a panic is fine.
		_ = VerifySignature(vectorHeader(string(rawSig), string(rawTS)), body, secret, now)
		if secret == "" {
			return
		}
		ts := now.Unix()
		sig := Sign(secret, ts, body)
		h := vectorHeader(sig, strconv.FormatInt(ts, 10))
		if err := VerifySignature(h, body, secret, now); err != nil {
			t.Fatalf("a valid signature did not verify: %v", err)
		}
		if len(body) > 0 {
			bad := append([]byte(nil), body...)
			bad[int(flip)%len(bad)] ^= 1 << (flip % 8)
			if VerifySignature(h, bad, secret, now) == nil {
				t.Fatal("a body with a flipped bit verified")
			}
		}
		badSig := []byte(sig)
		i := 3 + int(flip)%(len(badSig)-3)
		if badSig[i] == '0' {
			badSig[i] = '1'
		} else {
			badSig[i] = '0'
		}
		if VerifySignature(vectorHeader(string(badSig), strconv.FormatInt(ts, 10)), body, secret, now) == nil {
			t.Fatal("a signature with a changed digit verified")
		}
	})
}
