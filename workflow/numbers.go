package workflow

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Arguments are stored, fingerprinted and sent to the executor in canonical
// JSON (RFC 8785), whose numbers are 64-bit floats: 9007199254740993 would
// become 9007199254740992, 1e400 the largest float, 100.000000000000001 100,
// and the approver would have approved a number that is not the one that
// runs. A number a float does not hold exactly is refused instead, naming
// the field; one it holds (119.00, 1e2, 0.1) runs as its canonical text,
// which says the same number.

// numberProblem says why the JSON number text does not survive the round
// trip through a 64-bit float, or "".
func numberProblem(text string) string {
	if _, err := strconv.ParseFloat(text, 64); err != nil {
		return fmt.Sprintf("%s is out of the range signoff keeps numbers in (64-bit floats, about ±1.8e308): send it as a string", text)
	}
	// What Canonical stores, fingerprints and sends.
	c, err := Canonical([]byte(text))
	if err != nil {
		return fmt.Sprintf("%s cannot be read: %v", text, err)
	}
	if back := string(c); !sameDecimal(text, back) {
		return fmt.Sprintf("%s would be kept as %s: signoff keeps numbers as 64-bit floats, which hold about 16 significant digits; send it as a string, or with fewer digits", text, back)
	}
	return ""
}

// sameDecimal reports whether two JSON number texts are the same decimal
// number (-0 and 0 are).
func sameDecimal(a, b string) bool {
	na, oka := decimalOf(a)
	nb, okb := decimalOf(b)
	return oka && okb && na == nb
}

// decimal is a number as sign, significant digits (no leading or trailing
// zero) and the power of ten of the last one; zero has no digits.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// decimalOf reads a JSON number's text exactly, without big arithmetic, so
// that 1e-999999999 costs nothing.
func decimalOf(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return d, false
		}
		d.exp = e
	}
	digits := intPart + frac
	d.exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	d.exp += int64(len(digits) - len(trimmed))
	d.digits = strings.TrimLeft(trimmed, "0")
	if d.digits == "" {
		return decimal{}, true
	}
	return d, true
}

// checkNumber adds a problem for a number at path at that a float does not
// hold exactly.
func checkNumber(n json.Number, at string, ae *ArgsError) {
	if p := numberProblem(string(n)); p != "" {
		ae.Problems = append(ae.Problems, ArgProblem{Path: at, Reason: "the number " + p})
	}
}

// ratString prints a schema's bound as the decimal it is (0.01, not 1/100,
// and not rounded through a float), or as a float when it has no finite
// decimal form.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.RatString()
	}
	// A fraction whose denominator is 2^a·5^b has max(a, b) decimals.
	d := new(big.Int).Set(r.Denom())
	places := 0
	for _, p := range []int64{2, 5} {
		n := 0
		m := new(big.Int)
		for {
			q, rem := new(big.Int).QuoRem(d, big.NewInt(p), m)
			if rem.Sign() != 0 {
				break
			}
			d, n = q, n+1
		}
		places = max(places, n)
	}
	if d.Cmp(big.NewInt(1)) == 0 && places <= 400 {
		return r.FloatString(places)
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
