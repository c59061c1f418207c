package policy

import "testing"

func TestDistinctFingerprints(t *testing.T) {
	const fp = "c5851f9351c5d2e0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	tests := []struct {
		name         string
		a, b         string
		wantA, wantB string
	}{
		{"parting early: the short form", "ab" + fp[2:], fp, "ab851f9351c5d2e0", fp[:16]},
		{"parting late: up to the difference", fp[:40] + "0" + fp[41:], fp, fp[:40] + "0", fp[:41]},
		{"a short prefix of the other", fp[:12], fp, fp[:12], fp[:16]},
		{"equal: the short form", fp, fp, fp[:16], fp[:16]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := DistinctFingerprints(tt.a, tt.b)
			if a != tt.wantA || b != tt.wantB {
				t.Errorf("DistinctFingerprints = %s, %s; want %s, %s", a, b, tt.wantA, tt.wantB)
			}
		})
	}
}
