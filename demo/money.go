package demo

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxCents is the largest amount the shop accepts in one operation
// (1,000,000.00). It keeps every sum far away from int64 overflow; no charge
// in the shop comes near it.
const MaxCents = 100_000_000

// ParseAmount converts a decimal amount such as "119.00", "9.95" or "7" to
// integer cents. It refuses signs, exponents, more than two decimals, zero and
// amounts above MaxCents, so a typo never becomes a different refund.
func ParseAmount(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") {
		return 0, fmt.Errorf("amount %q: want a decimal number like 119.00", s)
	}
	if len(frac) > 2 {
		return 0, fmt.Errorf("amount %q: more than two decimals", s)
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("amount %q: want a decimal number like 119.00", s)
		}
	}
	whole = strings.TrimLeft(whole, "0")
	// Anything longer than MaxCents' whole part is too large, and checking the
	// length first keeps ParseInt away from overflow.
	if len(whole) > 7 {
		return 0, fmt.Errorf("amount %q: more than %s", s, FormatCents(MaxCents))
	}
	var units int64
	if whole != "" {
		units, _ = strconv.ParseInt(whole, 10, 64) // digits only, at most 7 of them
	}
	for len(frac) < 2 {
		frac += "0"
	}
	cents, _ := strconv.ParseInt(frac, 10, 64)
	total := units*100 + cents
	if total <= 0 {
		return 0, fmt.Errorf("amount %q: must be more than zero", s)
	}
	if total > MaxCents {
		return 0, fmt.Errorf("amount %q: more than %s", s, FormatCents(MaxCents))
	}
	return total, nil
}

// CentsFromFloat converts an amount decoded from JSON (119, 119.0, 9.95) to
// integer cents. It works on the shortest decimal that reads back as f, which
// is the number as it was written in the JSON: 9.95 is 995 cents although the
// float is 9.9499999…, while 9.955 or 0.1+0.2 (0.30000000000000004) have more
// than two decimals and are refused rather than rounded to a different amount.
func CentsFromFloat(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("amount %v: not a number", f)
	}
	if f <= 0 {
		return 0, fmt.Errorf("amount %s: must be more than zero", strconv.FormatFloat(f, 'f', -1, 64))
	}
	if f > MaxCents/100 {
		return 0, fmt.Errorf("amount %s: more than %s", strconv.FormatFloat(f, 'f', -1, 64), FormatCents(MaxCents))
	}
	return ParseAmount(strconv.FormatFloat(f, 'f', -1, 64))
}

// FormatCents renders cents as a decimal amount with two decimals: 11900 is
// "119.00", 995 is "9.95".
func FormatCents(c int64) string {
	sign, u := "", uint64(c)
	if c < 0 {
		// -(c+1)+1 stays in range even for the smallest int64.
		sign, u = "-", uint64(-(c+1))+1
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}
