package ratelimit

import (
	"testing"

	"pgregory.net/rapid"
)

// A window's stored name reads back into the window it names, without its
// limit, with or without a Redis prefix: what an order keeps
// (admitted_keys) is enough to give its slot back after the limits changed.
func TestParseWindowKeyReadsEveryNameBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWindow(t)
		w.Limit = 0
		key := rapid.SampledFrom([]Key{{BizType: "PAY", Channel: "ALIPAY"}, ChannelWide("WECHAT"), reserveKey("UNIONPAY", "REFUND_2")}).Draw(t, "key")
		kw := KeyWindow{Key: key, Window: w}
		if key.BizType == anyBizType+"REFUND_2" {
			kw.Track = TrackOwn
		}
		prefix := rapid.SampledFrom([]string{"", "payserver:rl:", "other:{tag}:"}).Draw(t, "prefix")
		name := prefix + WindowKey(kw)
		got, err := ParseWindowKey(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if idOf(got) != idOf(kw) || got.Track != kw.Track || got.Window.ID() != w.ID() {
			t.Fatalf("%q read back as %+v, want %+v", name, got, kw)
		}
	})
}

func TestParseWindowKeyRefusesWhatNoStoreNames(t *testing.T) {
	for _, name := range []string{
		"", "ALIPAY:PAY:1000", "{ALIPAY}:PAY", "{ALIPAY}:PAY:", "{ALIPAY}:PAY:-5", "{ALIPAY}:PAY:1000.CNY",
		"{ALIPAY}:PAY:week.0000.UTC", "{ALIPAY}:PAY:day.2500.UTC", "{ALIPAY}:PAY:day.0000.Mars/Base",
		"{ALIPAY}:pay:1000", "{ALIPAY}:*x:1000",
	} {
		if w, err := ParseWindowKey(name); err == nil {
			t.Errorf("%q parsed as %+v, want an error", name, w)
		}
	}
}

// A hold rebuilt from no names knows no windows; from names, exactly them.
func TestHoldFromWindowKeys(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	if h, err := HoldFromWindowKeys(k, "r1", nil); err != nil || h.Known() {
		t.Fatalf("no names: %+v, %v; want unknown windows", h, err)
	}
	h, err := HoldFromWindowKeys(k, "r1", []string{"payserver:rl:{ALIPAY}:PAY:1000", "{ALIPAY}:*:aday.2300.Asia/Shanghai.CNY"})
	if err != nil || !h.Known() || len(h.held(false)) != 2 || len(h.held(true)) != 1 {
		t.Fatalf("two names: %+v, %v", h, err)
	}
	if h, err := HoldFromWindowKeys(k, "r1", []string{"{ALIPAY}:PAY:1000", "junk"}); err == nil || h.Known() {
		t.Fatalf("a name that does not parse: %+v, %v; want an error and unknown windows", h, err)
	}
}
