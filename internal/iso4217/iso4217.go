// Package iso4217 knows the ISO 4217 currencies a payment may be made in
// and their minor units. It imports nothing of payserver, so that both the
// payment flow (package pay) and the limits document (package ratelimit)
// check currencies against the same table.
package iso4217

import "sort"

//go:generate go run gen.go

// Exponent returns the ISO 4217 minor-unit exponent of code (2 for CNY and
// USD, 0 for JPY, 3 for KWD), and whether code is an active ISO 4217
// currency a payment may be made in. Amounts are always in minor units:
// amount 1999 in a currency of exponent e is 1999 / 10^e of its major unit.
// XXX (no currency), XTS (testing), precious metals, bond-market units,
// SDR-like units and fund codes are not currencies here; neither is a
// withdrawn code or one in lower case. The table is generated from ISO
// 4217 data (gen.go).
func Exponent(code string) (exponent int, ok bool) {
	exponent, ok = exponents[code]
	return exponent, ok
}

// Codes returns every code Exponent accepts, sorted.
func Codes() []string {
	codes := make([]string, 0, len(exponents))
	for code := range exponents {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	return codes
}
