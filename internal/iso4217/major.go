package iso4217

import (
	"strconv"
	"strings"
)

// Major returns amount, in minor units of code, as a decimal string in
// major units with exactly Exponent(code) digits after the point and no
// thousands separators: Major(500000000, "CNY") is "5000000.00",
// Major(1000000, "JPY") is "1000000", Major(1500, "BHD") is "1.500". ok is
// false, and the string empty, when code is not a currency Exponent knows
// (including the empty code of an amount counted over every currency):
// such an amount has no major unit.
func Major(amount int64, code string) (major string, ok bool) {
	exp, ok := Exponent(code)
	if !ok {
		return "", false
	}
	whole, frac := split(amount, exp)
	if exp == 0 {
		return whole, true
	}
	return whole + "." + frac, true
}

// Text renders amount, in minor units of code, for people: major units
// with thousands separators, then the currency, as in "12,745.70 CNY",
// "1,000,000 JPY" and "1.500 BHD". An amount whose code is not a currency
// Exponent knows (or is empty) is written in minor units and says so:
// "500000000 minor units", or "1200 minor units of XYZ".
func Text(amount int64, code string) string {
	exp, ok := Exponent(code)
	if !ok {
		s := strconv.FormatInt(amount, 10) + " minor units"
		if code != "" {
			s += " of " + code
		}
		return s
	}
	whole, frac := split(amount, exp)
	whole = group(whole)
	if exp > 0 {
		whole += "." + frac
	}
	return whole + " " + code
}

// split returns amount / 10^exp as its whole part (with a leading "-" when
// amount is negative) and its exp fractional digits.
func split(amount int64, exp int) (whole, frac string) {
	neg := amount < 0
	digits := strconv.FormatInt(amount, 10)
	if neg {
		digits = digits[1:]
	}
	if len(digits) <= exp {
		digits = strings.Repeat("0", exp-len(digits)+1) + digits
	}
	whole, frac = digits[:len(digits)-exp], digits[len(digits)-exp:]
	if neg {
		whole = "-" + whole
	}
	return whole, frac
}

// group inserts a comma between every three digits of whole, counted from
// the right; a leading "-" stays in front.
func group(whole string) string {
	sign := ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}
