package pay

import "sort"

//go:generate go run currencies_gen.go

// CurrencyExponent returns the ISO 4217 minor-unit exponent of code (2 for
// CNY and USD, 0 for JPY, 3 for KWD), and whether code is an active ISO 4217
// currency a payment may be made in. Amounts are always in minor units:
// amount 1999 in a currency of exponent e is 1999 / 10^e of its major unit.
// XXX (no currency), XTS (testing), precious metals, bond-market units,
// SDR-like units and fund codes are not currencies here; neither is a
// withdrawn code or one in lower case. The table is generated from ISO
// 4217 data (currencies_gen.go).
func CurrencyExponent(code string) (exponent int, ok bool) {
	exponent, ok = currencyExponents[code]
	return exponent, ok
}

// Currencies returns every code CurrencyExponent accepts, sorted.
func Currencies() []string {
	codes := make([]string, 0, len(currencyExponents))
	for code := range currencyExponents {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	return codes
}
