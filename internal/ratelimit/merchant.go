package ratelimit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Merchants is one window's limits per merchant: each merchant's own use
// of the window may reach at most its limit (Model). The limits are in the
// window's unit: a count, or an amount in minor units.
type Merchants struct {
	// PerMerchant is the limit of every merchant Overrides does not name;
	// Unlimited when the document sets none (only overrides).
	PerMerchant int64
	// Overrides are the limits of named merchants: Unlimited for no limit,
	// 0 to refuse the merchant.
	Overrides map[string]int64
}

// LimitOf returns merchant's limit: its override, else PerMerchant.
func (m *Merchants) LimitOf(merchant string) int64 {
	if n, ok := m.Overrides[merchant]; ok {
		return n
	}
	return m.PerMerchant
}

// NoMerchant is the merchant of a request that names none, checked
// against a window with merchant limits: such requests share the limit of
// the merchant "-".
const NoMerchant = "-"

// maxMerchantLen is the most characters a merchant ID may have.
const maxMerchantLen = 64

// MerchantProblem returns why s is not a valid merchant ID, or "" if it is
// one: 1..maxMerchantLen characters, none a control character.
func MerchantProblem(s string) string {
	if n := utf8.RuneCountInString(s); n < 1 || n > maxMerchantLen {
		return fmt.Sprintf("must be 1..%d characters", maxMerchantLen)
	}
	// The control characters POST /pay refuses in a merchantId (C0 and
	// DEL), so that every merchant a payment names can be named here.
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "must be UTF-8 without control characters"
	}
	return ""
}

// MerchantLabel is merchant as a text listing merchants shows it: as it
// is when it holds only A-Z, a-z, 0-9, '_', '-' and '.', else quoted (Go
// syntax), so that an ID holding a separator, a space or nothing visible
// reads as one ID.
func MerchantLabel(merchant string) string {
	plain := merchant != ""
	for i := 0; i < len(merchant) && plain; i++ {
		plain = plainMerchantByte(merchant[i])
	}
	if plain {
		return merchant
	}
	return strconv.Quote(merchant)
}

// plainMerchantByte reports whether c stands for itself in a merchant ID
// as a key (MerchantKey) and a list (MerchantLabel) show it: A-Z, a-z,
// 0-9, '_', '-' and '.'.
func plainMerchantByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// merchantSep separates a key's bizType from the merchant in MerchantKey:
// never part of a bizType code.
const merchantSep = "@"

// MerchantKey is the key of the windows that count merchant's own use of
// k's windows: "BIZTYPE@MERCHANT" on k's channel, so that its windows are
// in the channel's Redis hash slot. The merchant is escaped (every byte
// but A-Z, a-z, 0-9, '_', '-' and '.' as %XX), so that a window's name
// still parses (ParseWindowKey) whatever the ID holds.
func MerchantKey(k Key, merchant string) Key {
	return Key{BizType: k.BizType + merchantSep + escapeMerchant(merchant), Channel: k.Channel}
}

// Merchant returns, for a key made by MerchantKey, the key whose windows it
// counts a merchant's use of and the merchant; ok is false for any other
// key.
func (k Key) Merchant() (base Key, merchant string, ok bool) {
	biz, esc, found := strings.Cut(k.BizType, merchantSep)
	if !found {
		return k, "", false
	}
	m, ok := unescapeMerchant(esc)
	if !ok {
		return k, "", false
	}
	return Key{BizType: biz, Channel: k.Channel}, m, true
}

// base is k without a merchant: the key whose windows a merchant key
// counts a merchant's use of, or k itself.
func (k Key) base() Key {
	if b, _, ok := k.Merchant(); ok {
		return b
	}
	return k
}

func escapeMerchant(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainMerchantByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func unescapeMerchant(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// merchantWindow is the window counting merchant's own use of window w of
// key k under the merchant limits ml: a window of the rules with its own
// key (MerchantKey) and the merchant's limit (trackingLimit for a merchant
// without one, so that its use is still counted).
func merchantWindow(k Key, w Window, ml *Merchants, merchant string) KeyWindow {
	mw := KeyWindow{Key: MerchantKey(k, merchant), Window: w, Merchant: merchant}
	if mw.Limit = ml.LimitOf(merchant); mw.Limit == Unlimited {
		mw.Limit = trackingLimit
	}
	return mw
}

// MerchantParents returns, for each window of windows, the index of the
// window whose merchant's use it counts (a window of the same span and
// unit, of its key without the merchant), or -1: for every window that
// counts no merchant's use, and for one whose window is not among windows.
// It is nil when no window counts a merchant's use. A window is known by
// its key (MerchantKey), so that windows read back from their names or a
// journal are linked as those of a check.
func MerchantParents(windows []KeyWindow) []int {
	isMerchant := func(w KeyWindow) bool { return strings.Contains(w.Key.BizType, merchantSep) }
	if !slices.ContainsFunc(windows, isMerchant) {
		return nil
	}
	out := make([]int, len(windows))
	for i, w := range windows {
		out[i] = -1
		base, _, ok := w.Key.Merchant()
		if !ok {
			continue
		}
		id := idOf(w)
		id.key = base
		for j, o := range windows {
			if !isMerchant(o) && o.Track == TrackNone && idOf(o) == id {
				out[i] = j
				break
			}
		}
	}
	return out
}

// requestMerchant is the merchant a request of merchant counts as in
// windows with merchant limits: NoMerchant when it names none.
func requestMerchant(merchant string) string {
	if merchant == "" {
		return NoMerchant
	}
	return merchant
}
