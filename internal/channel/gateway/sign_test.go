package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var (
	keyA = Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	keyB = Key{ID: "k2", Secret: []byte("fedcba9876543210fedcba9876543210")}
)

// TestSignatureVector: the signature is HMAC-SHA256 over
// "<timestamp>\n<nonce>\n<METHOD>\n<path>\n<body>" ("answer\n" first for an
// answer), checked against the standard library computing it independently.
func TestSignatureVector(t *testing.T) {
	body := []byte(`{"orderNo":"PS1"}`)
	for _, tc := range []struct {
		answer bool
		signed string
	}{
		{false, "1764200000\nn0nce\nPOST\n/ALIPAY/pay\n" + string(body)},
		{true, "answer\n1764200000\nn0nce\nPOST\n/ALIPAY/pay\n" + string(body)},
	} {
		m := hmac.New(sha256.New, keyA.Secret)
		m.Write([]byte(tc.signed))
		got := Signature(keyA.Secret, 1764200000, "n0nce", Message{Method: "POST", Path: "/ALIPAY/pay", Body: body, Answer: tc.answer})
		if want := hex.EncodeToString(m.Sum(nil)); got != want {
			t.Errorf("answer %v: Signature = %s, want %s", tc.answer, got, want)
		}
	}
}

// TestVerify: a signed message verifies under any listed key; another
// body, path, method, direction, key or a stale timestamp does not, each
// refused with its reason.
func TestVerify(t *testing.T) {
	now := time.Unix(1764200000, 0)
	m := Message{Method: "POST", Path: "/ALIPAY/query", Body: []byte(`{"orderNo":"PS1"}`)}
	h := http.Header{}
	Sign(h, keyB, m, now)
	if got, err := Verify(h, Keys{keyA, keyB}, m, now.Add(time.Minute)); err != nil || got.KeyID != "k2" || len(got.Nonce) != 2*NonceBytes {
		t.Fatalf("a good message: %+v %v", got, err)
	}
	with := func(f func(*Message)) Message { c := m; f(&c); return c }
	cases := []struct {
		name string
		err  func() error
		want Reason
	}{
		{"another body", func() error {
			_, err := Verify(h, Keys{keyB}, with(func(c *Message) { c.Body = []byte(`{}`) }), now)
			return err
		}, ReasonSignature},
		{"another path", func() error {
			_, err := Verify(h, Keys{keyB}, with(func(c *Message) { c.Path = "/ALIPAY/close" }), now)
			return err
		}, ReasonSignature},
		{"another method", func() error {
			_, err := Verify(h, Keys{keyB}, with(func(c *Message) { c.Method = "PUT" }), now)
			return err
		}, ReasonSignature},
		{"as an answer", func() error {
			_, err := Verify(h, Keys{keyB}, with(func(c *Message) { c.Answer = true }), now)
			return err
		}, ReasonSignature},
		{"key removed", func() error { _, err := Verify(h, Keys{keyA}, m, now); return err }, ReasonUnknownKey},
		{"another secret under the id", func() error {
			_, err := Verify(h, Keys{{ID: "k2", Secret: keyA.Secret}}, m, now)
			return err
		}, ReasonSignature},
		{"stale", func() error { _, err := Verify(h, Keys{keyB}, m, now.Add(MaxSkew+time.Second)); return err }, ReasonStale},
		{"from the future", func() error { _, err := Verify(h, Keys{keyB}, m, now.Add(-MaxSkew-time.Second)); return err }, ReasonStale},
		{"no headers", func() error { _, err := Verify(http.Header{}, Keys{keyB}, m, now); return err }, ReasonSignature},
		{"short nonce", func() error {
			h2 := h.Clone()
			h2.Set(HeaderNonce, "abcd")
			_, err := Verify(h2, Keys{keyB}, m, now)
			return err
		}, ReasonSignature},
	}
	for _, tc := range cases {
		err := tc.err()
		if got, _ := ReasonOf(err); got != tc.want || !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v (reason %q), want reason %q", tc.name, err, got, tc.want)
		}
	}
}

// TestNonceCache: a nonce is refused as replayed within 2×MaxSkew of its
// arrival and forgotten after; a full cache refuses rather than forgets.
func TestNonceCache(t *testing.T) {
	now := time.Unix(1764200000, 0)
	c := NewNonceCache(2)
	if err := c.Add("ALIPAY", "n1", now); err != nil {
		t.Fatal(err)
	}
	if r, _ := ReasonOf(c.Add("ALIPAY", "n1", now.Add(2*MaxSkew-time.Second))); r != ReasonReplayed {
		t.Errorf("a nonce seen again: reason %q, want replayed", r)
	}
	if err := c.Add("WECHAT", "n1", now); err != nil {
		t.Errorf("the nonce on another channel: %v", err)
	}
	if err := c.Add("ALIPAY", "n3", now); !errors.Is(err, ErrNonceCacheFull) {
		t.Errorf("a third nonce in a cache of 2: %v, want ErrNonceCacheFull", err)
	}
	if err := c.Add("ALIPAY", "n1", now.Add(2*MaxSkew)); err != nil {
		t.Errorf("the nonce after the window: %v", err)
	}
	if got := c.Len(); got != 1 {
		t.Errorf("Len %d after the window, want 1", got)
	}
}

// TestKeysValidate: keys need an id each, once, and 32 bytes of secret;
// the error never shows a secret.
func TestKeysValidate(t *testing.T) {
	short := Key{ID: "short", Secret: []byte("too-short-secret-value")}
	for name, ks := range map[string]Keys{
		"none": nil, "no id": {{Secret: keyA.Secret}}, "twice": {keyA, keyA}, "short": {keyA, short},
		"bad id": {{ID: "a b", Secret: keyA.Secret}},
	} {
		err := ks.Validate()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		for _, k := range ks {
			if len(k.Secret) > 0 && strings.Contains(err.Error(), string(k.Secret)) {
				t.Errorf("%s: error %q shows a secret", name, err)
			}
		}
	}
	if err := (Keys{keyA, keyB}).Validate(); err != nil {
		t.Errorf("good keys: %v", err)
	}
}
