package pay

import "payserver/internal/iso4217"

// CurrencyExponent returns the ISO 4217 minor-unit exponent of code (2 for
// CNY and USD, 0 for JPY, 3 for KWD), and whether code is an active ISO 4217
// currency a payment may be made in; see iso4217.Exponent, whose table the
// limits document checks its currencies against too.
func CurrencyExponent(code string) (exponent int, ok bool) { return iso4217.Exponent(code) }

// Currencies returns every code CurrencyExponent accepts, sorted.
func Currencies() []string { return iso4217.Codes() }
