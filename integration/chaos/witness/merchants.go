package witness

import "strings"

// noMerchant is the merchant of a request that names none, in windows with
// limits per merchant.
const noMerchant = "-"

// merchantKey names the witness's own record of merchant's use of key's
// windows: "BIZTYPE@MERCHANT:CHANNEL", so that channelOf still finds the
// channel. It is the witness's name, not payserver's Redis key.
func merchantKey(key, merchant string) string {
	biz, ch, _ := strings.Cut(key, ":")
	return biz + "@" + merchant + ":" + ch
}

// splitMerchantKey returns, for a key made by merchantKey, the key and the
// merchant; ok is false for any other key.
func splitMerchantKey(key string) (base, merchant string, ok bool) {
	biz, ch, _ := strings.Cut(key, ":")
	b, m, found := strings.Cut(biz, "@")
	if !found {
		return key, "", false
	}
	return b + ":" + ch, m, true
}

// windowsOf lists the windows that count a request of this amount,
// currency and merchant under the rule set: windowsFor's, and for each of
// them with limits per merchant the merchant's own use of it (a window of
// its own, keyed by merchantKey, with the merchant's limit; none where the
// merchant has no limit).
func (r ruleSet) windowsOf(amount int64, currency, merchant string) []scoped {
	out := r.windowsFor(amount, currency)
	if merchant == "" {
		merchant = noMerchant
	}
	for _, s := range out[:len(out):len(out)] {
		if !s.window.HasMerchants {
			continue
		}
		l := s.window.merchantLimit(merchant)
		if l == -1 {
			continue
		}
		out = append(out, scoped{key: merchantKey(s.key, merchant), window: Window{ID: s.window.ID, Limit: l}, shadow: s.shadow, merchant: merchant})
	}
	return out
}
