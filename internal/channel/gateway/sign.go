package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Header names of a signed message.
const (
	HeaderTimestamp = "X-Gateway-Timestamp" // Unix seconds
	HeaderSignature = "X-Gateway-Signature" // hex HMAC-SHA256
)

// MaxSkew is how far a message's timestamp may be from the receiver's
// clock: an older (or later) one is refused as stale, so a captured message
// cannot be replayed later.
const MaxSkew = 5 * time.Minute

// ErrBadSignature is a message whose signature is missing, malformed or
// wrong, or whose timestamp is stale.
var ErrBadSignature = errors.New("gateway: bad or stale signature")

// Signature returns the hex HMAC-SHA256 of timestamp "." body under secret.
func Signature(secret []byte, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Sign sets h's timestamp (now) and signature of body.
func Sign(h http.Header, secret []byte, body []byte, now time.Time) {
	ts := now.Unix()
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Signature(secret, ts, body))
}

// Verify checks h's signature of body under secret, and that its timestamp
// is within MaxSkew of now. The error never carries the secret or the
// expected signature.
func Verify(h http.Header, secret []byte, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: timestamp %d is %v from now", ErrBadSignature, ts, d.Round(time.Second))
	}
	got, err := hex.DecodeString(h.Get(HeaderSignature))
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: malformed signature", ErrBadSignature)
	}
	want, _ := hex.DecodeString(Signature(secret, ts, body))
	if !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}
