package stdwebhook

import (
	"strings"
	"testing"
	"time"
)

// The example of the Standard Webhooks specification and its reference
// libraries: a signer that reproduces it is verified by them.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS     = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignReproducesTheSpecificationExample(t *testing.T) {
	keys, err := ParseSecrets(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := Sign(keys, specID, time.Unix(specTS, 0), []byte(specBody)); got != specSig {
		t.Fatalf("Sign = %q, want %q", got, specSig)
	}
}

func TestSignWithEveryKeyWhileOneRotates(t *testing.T) {
	other := "whsec_" + strings.Repeat("QUJD", 8) // 24 bytes of ABC…
	keys, err := ParseSecrets(other + "  " + specSecret)
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(keys, specID, time.Unix(specTS, 0), []byte(specBody))
	sigs := strings.Fields(got)
	if len(sigs) != 2 || sigs[1] != specSig {
		t.Fatalf("Sign = %q, want two signatures, the second %q", got, specSig)
	}
	old, _ := ParseSecrets(specSecret)
	if err := Verify(old, specID, "1614265330", got, []byte(specBody), time.Unix(specTS+10, 0), 5*time.Minute); err != nil {
		t.Fatalf("a target with the old key: %v", err)
	}
}

func TestVerify(t *testing.T) {
	keys, _ := ParseSecrets(specSecret)
	now := time.Unix(specTS, 0)
	tests := []struct {
		name, ts, sig, body string
		now                 time.Time
		ok                  bool
	}{
		{"valid", "1614265330", specSig, specBody, now, true},
		{"one of several", "1614265330", "v1,bm9wZQ== " + specSig, specBody, now, true},
		{"body changed", "1614265330", specSig, `{"test": 2432232315}`, now, false},
		{"timestamp changed", "1614265331", specSig, specBody, now, false},
		{"too old", "1614265330", specSig, specBody, now.Add(6 * time.Minute), false},
		{"other version", "1614265330", "v1a," + specSig[3:], specBody, now, false},
		{"no signature", "1614265330", "", specBody, now, false},
		{"bad timestamp", "soon", specSig, specBody, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(keys, specID, tt.ts, tt.sig, []byte(tt.body), tt.now, 5*time.Minute)
			if (err == nil) != tt.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestParseSecretsRefusesWithoutRepeatingTheValue(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"empty", "  ", "empty"},
		{"no prefix", "hunter2hunter2hunter2hunter2", "does not start with whsec_"},
		{"not base64", "whsec_%%%%hunter2", "not base64"},
		{"too short", "whsec_aHVudGVyMg==", "is 7 bytes"},
		{"second bad", specSecret + " whsec_aHVudGVyMg==", "secret 2 is 7 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSecrets(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg") {
				t.Fatalf("the error repeats the secret: %v", err)
			}
		})
	}
}

func FuzzParseSecrets(f *testing.F) {
	f.Add(specSecret)
	f.Add("whsec_ whsec_x")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseSecrets(s)
		if err == nil && len(keys) == 0 {
			t.Fatal("no error and no key")
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Unix(1614265330, 0)
	for _, s := range []string{"7", "0", "-3", "Wed, 21 Oct 2015 07:28:00 GMT", "Sun, 06 Nov 2050 08:49:37 GMT", "99999999999999999999", " 12 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := ParseRetryAfter(s, now, time.Hour)
		if d < 0 || d > time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v", s, d)
		}
	})
}
