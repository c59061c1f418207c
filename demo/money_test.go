package demo

import (
	"math"
	"math/big"
	"strconv"
	"testing"
)

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // 0: refused
	}{
		{"119.00", 11900},
		{"119", 11900},
		{"9.95", 995},
		{"9.9", 990},
		{"0.01", 1},
		{"007.50", 750},
		{"1000000", MaxCents},
		{"1000000.01", 0},
		{"99999999999999999999", 0},
		{"0", 0},
		{"0.00", 0},
		{"1.005", 0},
		{"-1", 0},
		{"+1", 0},
		{"1e2", 0},
		{".5", 0},
		{"5.", 0},
		{"", 0},
		{" 5", 0},
		{"1,50", 0},
		{"١٢", 0}, // Arabic-Indic digits
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("ParseAmount(%q) = %d, want a refusal", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestCentsFromFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want int64 // 0: refused
	}{
		{119.00, 11900},
		{9.95, 995}, // the float is 9.9499999…
		{0.29, 29},  // 0.29*100 is 28.999999999999996
		{1.1, 110},
		{4.35, 435}, // 4.35*100 is 434.99999999999994
		{1000000, MaxCents},
		{math.Nextafter(0.3, 1), 0}, // 0.30000000000000004 (0.1+0.2 at run time): more than two decimals
		{9.955, 0},
		{0.001, 0},
		{0, 0},
		{math.Copysign(0, -1), 0},
		{-9.95, 0},
		{1000000.01, 0},
		{1e300, 0},
		{math.NaN(), 0},
		{math.Inf(1), 0},
	}
	for _, tt := range tests {
		got, err := CentsFromFloat(tt.in)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("CentsFromFloat(%v) = %d, want a refusal", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CentsFromFloat(%v) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatCents(t *testing.T) {
	for c, want := range map[int64]string{0: "0.00", 5: "0.05", 995: "9.95", 11900: "119.00", -150: "-1.50", math.MinInt64: "-92233720368547758.08"} {
		if got := FormatCents(c); got != want {
			t.Errorf("FormatCents(%d) = %q, want %q", c, got, want)
		}
	}
}

// FuzzCents checks that an accepted float amount is exactly the decimal it
// was written as, in range, and survives a round trip through FormatCents.
func FuzzCents(f *testing.F) {
	for _, v := range []float64{119, 9.95, 0.29, math.Nextafter(0.3, 1), 1e6, 1e6 + 0.01, -1, 0, 1.005, 4.35} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		c, err := CentsFromFloat(v)
		if err != nil {
			return
		}
		if c <= 0 || c > MaxCents {
			t.Fatalf("CentsFromFloat(%v) = %d, out of range", v, c)
		}
		// The two-decimal rendering must read back as the very same float:
		// nothing was rounded away.
		back, err := strconv.ParseFloat(FormatCents(c), 64)
		if err != nil || back != v {
			t.Fatalf("CentsFromFloat(%v) = %d, which reads back as %v", v, c, back)
		}
		if again, err := ParseAmount(FormatCents(c)); err != nil || again != c {
			t.Fatalf("ParseAmount(FormatCents(%d)) = %d, %v", c, again, err)
		}
	})
}

// FuzzParseAmount checks ParseAmount against exact rational arithmetic.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"119.00", "9.95", "0.01", "1.005", "-1", "1e2", "", ".", "00.10", "1000000.00", "1000000.01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseAmount(s)
		if err != nil {
			return
		}
		if c <= 0 || c > MaxCents {
			t.Fatalf("ParseAmount(%q) = %d, out of range", s, c)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ParseAmount(%q) = %d, but it is not a number", s, c)
		}
		if r.Mul(r, big.NewRat(100, 1)).Cmp(big.NewRat(c, 1)) != 0 {
			t.Fatalf("ParseAmount(%q) = %d cents, not exactly 100 times the amount", s, c)
		}
		if again, err := ParseAmount(FormatCents(c)); err != nil || again != c {
			t.Fatalf("ParseAmount(FormatCents(%d)) = %d, %v", c, again, err)
		}
	})
}
