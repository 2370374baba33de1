package ratelimit

import (
	"fmt"
	"strings"
)

// MaxCodeLen is the longest bizType or channel code accepted.
const MaxCodeLen = 32

// Key identifies one limited pair of business type and payment channel. Both
// parts are 1..MaxCodeLen characters of [A-Z0-9_], so the ':' separator in
// String can never be part of either half and two pairs never share a key.
type Key struct {
	BizType string
	Channel string
}

// anyBizType is the bizType of a channel-wide key, "*:CHANNEL": every
// bizType on the channel together.
const anyBizType = "*"

// ResolveBizType is the reserved bizType of the resolver's channel queries:
// the key "RESOLVE:CHANNEL" (ResolveKey) counts the queries and closes that
// payserver sends a channel to learn the outcome of payments it does not
// know. A resolver check counts only in its own key's windows: never in the
// channel-wide windows "*:CHANNEL", never in or against their reservations
// (Model); the limits document may give the key count windows only, no
// reservation may name it, and no route may route it. A channel whose
// RESOLVE key the document does not set has unlimited resolver queries.
const ResolveBizType = "RESOLVE"

// ResolveKey returns the key that counts the resolver's queries of channel:
// "RESOLVE:CHANNEL".
func ResolveKey(channel string) Key { return Key{BizType: ResolveBizType, Channel: channel} }

// IsResolve reports whether k is a resolver key (ResolveBizType).
func (k Key) IsResolve() bool { return k.BizType == ResolveBizType }

// ChannelWide returns the channel-wide key of channel.
func ChannelWide(channel string) Key { return Key{BizType: anyBizType, Channel: channel} }

// IsChannelWide reports whether k is a channel-wide key.
func (k Key) IsChannelWide() bool { return k.BizType == anyBizType }

// String returns the key as ops write it in the limits document:
// "BIZTYPE:CHANNEL".
func (k Key) String() string { return k.BizType + ":" + k.Channel }

// ParseKey parses "BIZTYPE:CHANNEL" and validates both halves.
func ParseKey(s string) (Key, error) {
	biz, ch, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, fmt.Errorf("key %q: want BIZTYPE:CHANNEL", s)
	}
	k := Key{BizType: biz, Channel: ch}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Validate reports whether both halves are well-formed codes; the bizType
// may also be anyBizType.
func (k Key) Validate() error {
	if reason := CodeProblem(k.BizType); reason != "" && !k.IsChannelWide() {
		return fmt.Errorf("key %q: bizType %s", k.String(), reason)
	}
	if reason := CodeProblem(k.Channel); reason != "" {
		return fmt.Errorf("key %q: channel %s", k.String(), reason)
	}
	return nil
}

// CodeProblem returns why s is not a valid bizType or channel code, or "" if
// it is one: 1..MaxCodeLen characters of [A-Z0-9_].
func CodeProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxCodeLen {
		return fmt.Sprintf("must be at most %d characters", MaxCodeLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "must contain only A-Z, 0-9 and _"
		}
	}
	return ""
}

// BizTypeProblem is CodeProblem for a bizType a client sends: RESOLVE is
// reserved for the resolver of unknown outcomes, whose checks count only
// on RESOLVE:<CHANNEL> and never in channel-wide windows.
func BizTypeProblem(s string) string {
	if p := CodeProblem(s); p != "" {
		return p
	}
	if s == ResolveBizType {
		return "must not be " + ResolveBizType + ": it is reserved for the resolver of unknown outcomes"
	}
	return ""
}
