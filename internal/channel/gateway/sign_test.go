package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestSignatureVector: the signature is HMAC-SHA256 over "timestamp.body",
// checked against the standard library computing it independently.
func TestSignatureVector(t *testing.T) {
	secret, body := []byte("s3cret"), []byte(`{"orderNo":"PS1"}`)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("1764200000." + string(body)))
	if got, want := Signature(secret, 1764200000, body), hex.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("Signature = %s, want %s", got, want)
	}
}

// TestVerify: a signed message verifies; another body, another secret, a
// stale or future timestamp, or a missing header does not.
func TestVerify(t *testing.T) {
	now := time.Unix(1764200000, 0)
	secret, body := []byte("s3cret"), []byte(`{"orderNo":"PS1"}`)
	h := http.Header{}
	Sign(h, secret, body, now)
	if err := Verify(h, secret, body, now.Add(time.Minute)); err != nil {
		t.Fatalf("a good message: %v", err)
	}
	cases := map[string]func() error{
		"another body":   func() error { return Verify(h, secret, []byte(`{"orderNo":"PS2"}`), now) },
		"another secret": func() error { return Verify(h, []byte("other"), body, now) },
		"stale":          func() error { return Verify(h, secret, body, now.Add(MaxSkew+time.Second)) },
		"from the future": func() error {
			return Verify(h, secret, body, now.Add(-MaxSkew-time.Second))
		},
		"no headers": func() error { return Verify(http.Header{}, secret, body, now) },
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}
