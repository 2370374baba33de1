package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Header names of a signed message.
const (
	HeaderTimestamp = "X-Gateway-Timestamp" // Unix seconds
	HeaderNonce     = "X-Gateway-Nonce"     // hex, at least NonceBytes random bytes
	HeaderKeyID     = "X-Gateway-Key-Id"    // the id of the key that signed
	HeaderSignature = "X-Gateway-Signature" // hex HMAC-SHA256
)

// MaxSkew is how far a message's timestamp may be from the receiver's
// clock: an older (or later) one is refused as stale. Within it, a
// receiver's NonceCache refuses a nonce seen before.
const MaxSkew = 5 * time.Minute

// NonceBytes is the number of random bytes of a nonce; a shorter one is
// refused.
const NonceBytes = 16

// MinKeyBytes is the shortest secret a Key may have.
const MinKeyBytes = 32

// ErrBadSignature is a message refused by Verify or a NonceCache: every
// *RefusedError is one (errors.Is).
var ErrBadSignature = errors.New("gateway: bad, stale or replayed signature")

// Reason says why a message was refused, as the metric
// payserver_channel_messages_refused_total labels it.
type Reason string

// The reasons.
const (
	// ReasonSignature: headers missing or malformed, or a signature that
	// does not match the message under the key it names.
	ReasonSignature Reason = "signature"
	// ReasonStale: a timestamp more than MaxSkew from the receiver's clock.
	ReasonStale Reason = "stale"
	// ReasonReplayed: a nonce already seen within the window.
	ReasonReplayed Reason = "replayed"
	// ReasonUnknownKey: a key id that is not among the channel's keys.
	ReasonUnknownKey Reason = "unknown_key"
)

// Reasons are all the reasons, for metrics that start every series at 0.
var Reasons = []Reason{ReasonSignature, ReasonStale, ReasonReplayed, ReasonUnknownKey}

// RefusedError is a message refused, and why. It never carries a secret or
// an expected signature.
type RefusedError struct {
	Reason Reason
	Detail string
}

func (e *RefusedError) Error() string {
	if e.Detail == "" {
		return "gateway: message refused (" + string(e.Reason) + ")"
	}
	return "gateway: message refused (" + string(e.Reason) + "): " + e.Detail
}

// Is makes every RefusedError an ErrBadSignature.
func (e *RefusedError) Is(target error) bool { return target == ErrBadSignature }

func refused(r Reason, format string, args ...any) error {
	return &RefusedError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns why err refused a message, and false when err is no
// *RefusedError.
func ReasonOf(err error) (Reason, bool) {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason, true
	}
	return "", false
}

// Key is one signing key of a channel. Its String and LogValue never show
// the secret.
type Key struct {
	ID     string
	Secret []byte
}

// String describes k by its id alone.
func (k Key) String() string { return "gateway.Key{ID:" + k.ID + " Secret:[redacted]}" }

// LogValue logs k by its id alone.
func (k Key) LogValue() slog.Value { return slog.GroupValue(slog.String("id", k.ID)) }

// Keys is a channel's key list: the first signs, a message signed under
// any of them is accepted. Rolling a key takes three steps, each done on
// both sides before the next: add the new key second, move it first,
// remove the old one.
type Keys []Key

// Validate reports the first key that cannot be used: none at all, an
// empty or repeated id, or a secret shorter than MinKeyBytes. The error
// names keys by id, never by secret.
func (ks Keys) Validate() error {
	if len(ks) == 0 {
		return errors.New("no keys")
	}
	seen := map[string]bool{}
	for i, k := range ks {
		switch {
		case k.ID == "":
			return fmt.Errorf("key %d has no id", i+1)
		case !validKeyID(k.ID):
			return fmt.Errorf("key id %q: want letters, digits, '.', '_' or '-', at most 64", k.ID)
		case seen[k.ID]:
			return fmt.Errorf("key id %q is given twice", k.ID)
		case len(k.Secret) < MinKeyBytes:
			return fmt.Errorf("key %q is %d bytes, shorter than %d", k.ID, len(k.Secret), MinKeyBytes)
		}
		seen[k.ID] = true
	}
	return nil
}

func validKeyID(id string) bool {
	if len(id) > 64 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// IDs returns the keys' ids, in order, for logs.
func (ks Keys) IDs() []string {
	ids := make([]string, len(ks))
	for i, k := range ks {
		ids[i] = k.ID
	}
	return ids
}

// Clone returns a deep copy of ks.
func (ks Keys) Clone() Keys {
	out := make(Keys, len(ks))
	for i, k := range ks {
		out[i] = Key{ID: k.ID, Secret: bytes.Clone(k.Secret)}
	}
	return out
}

func (ks Keys) find(id string) (Key, bool) {
	for _, k := range ks {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// Message is what a signature binds besides its timestamp and nonce: the
// request's method and path (an answer's are its request's), the body,
// and whether it is an answer.
type Message struct {
	Method string
	// Path is the request's URL path, channel code included
	// (/ALIPAY/pay, /channels/ALIPAY/notify).
	Path   string
	Body   []byte
	Answer bool
}

// StringToSign is the signed string of m at timestamp with nonce:
// "<timestamp>\n<nonce>\n<METHOD>\n<path>\n<body>", prefixed by
// "answer\n" for an answer.
func StringToSign(timestamp int64, nonce string, m Message) []byte {
	var b bytes.Buffer
	if m.Answer {
		b.WriteString("answer\n")
	}
	b.WriteString(strconv.FormatInt(timestamp, 10))
	b.WriteByte('\n')
	b.WriteString(nonce)
	b.WriteByte('\n')
	b.WriteString(m.Method)
	b.WriteByte('\n')
	b.WriteString(m.Path)
	b.WriteByte('\n')
	b.Write(m.Body)
	return b.Bytes()
}

// Signature returns the hex HMAC-SHA256 of StringToSign under secret.
func Signature(secret []byte, timestamp int64, nonce string, m Message) string {
	h := hmac.New(sha256.New, secret)
	h.Write(StringToSign(timestamp, nonce, m))
	return hex.EncodeToString(h.Sum(nil))
}

// NewNonce returns NonceBytes fresh random bytes, hex.
func NewNonce() string {
	var b [NonceBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Sign sets h's timestamp (now), a fresh nonce, the key's id and the
// signature of m under key.
func Sign(h http.Header, key Key, m Message, now time.Time) {
	ts, nonce := now.Unix(), NewNonce()
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderKeyID, key.ID)
	h.Set(HeaderSignature, Signature(key.Secret, ts, nonce, m))
}

// Signed is what Verify read from a message it accepted.
type Signed struct {
	KeyID     string
	Nonce     string
	Timestamp int64
}

// Verify checks h's signature of m under the key of keys that h names,
// and that its timestamp is within MaxSkew of now. It does not check the
// nonce against earlier messages: a receiver does that with a NonceCache,
// after Verify. Its error is a *RefusedError, which never carries a secret
// or the expected signature.
func Verify(h http.Header, keys Keys, m Message, now time.Time) (Signed, error) {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return Signed{}, refused(ReasonSignature, "no timestamp")
	}
	nonce := h.Get(HeaderNonce)
	if raw, err := hex.DecodeString(nonce); err != nil || len(raw) < NonceBytes || len(nonce) > 128 {
		return Signed{}, refused(ReasonSignature, "nonce missing, not hex, or shorter than %d bytes", NonceBytes)
	}
	got, err := hex.DecodeString(h.Get(HeaderSignature))
	if err != nil || len(got) != sha256.Size {
		return Signed{}, refused(ReasonSignature, "malformed signature")
	}
	id := h.Get(HeaderKeyID)
	key, ok := keys.find(id)
	if !ok {
		return Signed{}, refused(ReasonUnknownKey, "key id %q is not one of the channel's", truncate(id, 64))
	}
	want, _ := hex.DecodeString(Signature(key.Secret, ts, nonce, m))
	if !hmac.Equal(got, want) {
		return Signed{}, refused(ReasonSignature, "signature does not match under key %q", id)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
		return Signed{}, refused(ReasonStale, "timestamp %d is %v from now", ts, d.Round(time.Second))
	}
	return Signed{KeyID: id, Nonce: nonce, Timestamp: ts}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
