package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// mustLimiter returns a Limiter on store with cfg in force.
func mustLimiter(t *testing.T, store Store, opts Options, cfg *Config) *Limiter {
	t.Helper()
	l, err := New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	return l
}

// dayUTC is the calendar of a day window from 00:00 UTC.
var dayUTC = Calendar{Unit: CalendarDay, Zone: time.UTC}

func mustDecide(t *testing.T, l *Limiter, r Request) Decision {
	t.Helper()
	d, err := l.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check(%+v): %v", r, err)
	}
	return d
}

// TestAdmissionRecordInProcess: the in-process stores time an admission by
// their clock and name its windows by WindowKey; a duplicate keeps its
// first admission's time, across a restart of the journaled store.
func TestAdmissionRecordInProcess(t *testing.T) {
	cfg := &Config{Rules: map[Key]Rule{
		{BizType: "PAY", Channel: "ALIPAY"}: {Windows: []Window{{Limit: 5, Size: 10 * time.Second}, {Limit: 5, Calendar: dayUTC}}},
		ChannelWide("ALIPAY"):               {Windows: []Window{{Limit: 10, Size: time.Minute}}},
	}}
	want := []string{"{ALIPAY}:PAY:10000", "{ALIPAY}:PAY:day.0000.UTC", "{ALIPAY}:*:60000"}
	path := filepath.Join(t.TempDir(), "limiter.journal")
	for _, tc := range []struct {
		name  string
		store func(clock *testutil.Clock) Store
	}{
		{"local", func(clock *testutil.Clock) Store { return NewLocalStore(clock.Now) }},
		{"durable", func(clock *testutil.Clock) Store {
			s, err := OpenDurableStore(path, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock(time.Date(2026, 5, 1, 10, 3, 17, 123_456_789, time.UTC))
			l := mustLimiter(t, tc.store(clock), Options{Now: clock.Now}, cfg)
			r := Request{Key: Key{BizType: "PAY", Channel: "ALIPAY"}, Member: "m1"}
			d := mustDecide(t, l, r)
			first := time.UnixMicro(clock.Now().UnixMicro())
			if !d.Allowed || !d.AdmittedAt.Equal(first) || !slices.Equal(d.WindowKeys, want) {
				t.Fatalf("got %+v, want admitted at %v in %q", d, first, want)
			}
			clock.Advance(2 * time.Second)
			if tc.name == "durable" {
				// A restart: the journal keeps when the member was admitted.
				l = mustLimiter(t, tc.store(clock), Options{Now: clock.Now}, cfg)
			}
			if dup := mustDecide(t, l, r); !dup.Duplicate || !dup.AdmittedAt.Equal(first) {
				t.Fatalf("retry: got %+v, want a duplicate first admitted at %v", dup, first)
			}
		})
	}
}

// downStore is a store whose Redis refuses connections.
type downStore struct{ *LocalStore }

func (downStore) Check(context.Context, []KeyWindow, string, int64) (StoreResult, error) {
	return StoreResult{}, fmt.Errorf("%w: %w", ErrNotSent, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
}

// TestAdmissionRecordWithoutTheStore: a degraded admission in process is
// timed by the limiter's clock and names the in-process windows; an
// admission no window records (fail-open, unlimited, a shadow admission of
// a refusal) is timed by the limiter's clock and names none.
func TestAdmissionRecordWithoutTheStore(t *testing.T) {
	cfg := &Config{Rules: map[Key]Rule{
		{BizType: "PAY", Channel: "ALIPAY"}:    {Windows: []Window{{Limit: 5, Size: 10 * time.Second}}},
		{BizType: "SHADOW", Channel: "ALIPAY"}: {Windows: []Window{{Limit: 1, Size: time.Second}}, Shadow: true},
	}}
	for _, tc := range []struct {
		policy Policy
		key    Key
		source Source
		keys   []string
	}{
		{PolicyLocal, Key{BizType: "PAY", Channel: "ALIPAY"}, SourceLocal, []string{"{ALIPAY}:PAY:10000"}},
		{PolicyAllow, Key{BizType: "PAY", Channel: "ALIPAY"}, SourceFailOpen, nil},
		{PolicyLocal, Key{BizType: "FREE", Channel: "ALIPAY"}, SourceUnlimited, nil},
	} {
		t.Run(string(tc.source), func(t *testing.T) {
			clock := testutil.NewClock(time.Date(2026, 5, 1, 10, 3, 17, 123_456_789, time.UTC))
			l := mustLimiter(t, downStore{NewLocalStore(nil)}, Options{Now: clock.Now, Policy: tc.policy}, cfg)
			d := mustDecide(t, l, Request{Key: tc.key, Member: "m1"})
			at := time.UnixMicro(clock.Now().UnixMicro())
			if !d.Allowed || d.Source != tc.source || !d.AdmittedAt.Equal(at) || !slices.Equal(d.WindowKeys, tc.keys) {
				t.Fatalf("got %+v, want admitted (%s) at %v in %q", d, tc.source, at, tc.keys)
			}
		})
	}
	t.Run("shadow", func(t *testing.T) {
		clock := testutil.NewClock(time.Date(2026, 5, 1, 10, 3, 17, 0, time.UTC))
		l := mustLimiter(t, NewLocalStore(clock.Now), Options{Now: clock.Now}, cfg)
		mustDecide(t, l, Request{Key: Key{BizType: "SHADOW", Channel: "ALIPAY"}, Member: "m0"})
		d := mustDecide(t, l, Request{Key: Key{BizType: "SHADOW", Channel: "ALIPAY"}, Member: "m1"})
		if !d.Allowed || !d.Shadow || !d.AdmittedAt.Equal(clock.Now()) || d.WindowKeys != nil {
			t.Fatalf("got %+v, want a shadow admission at %v in no window", d, clock.Now())
		}
	})
}

// TestLimitsVersionFollowsTheDocument: every decision names the limits in
// force by their Version (the document's MD5, limits.Parse); new limits
// change it, the same ones again do not; a Config made in code without a
// Version is named by a hash of its content.
func TestLimitsVersionFollowsTheDocument(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	versioned := func(limit int64, version string) *Config {
		return &Config{Version: version, Rules: map[Key]Rule{k: {Windows: []Window{{Limit: limit, Size: time.Second}}}}}
	}
	const md5One, md5Two = "11111111111111111111111111111111", "22222222222222222222222222222222"
	l := mustLimiter(t, NewLocalStore(nil), Options{}, versioned(1, md5One))
	v1 := mustDecide(t, l, Request{Key: k, Member: "a"}).LimitsVersion
	if refused := mustDecide(t, l, Request{Key: k, Member: "b"}); refused.Allowed || v1 != md5One || refused.LimitsVersion != v1 {
		t.Fatalf("admission %q, refusal %+v, want version %q", v1, refused, md5One)
	}
	l.SetConfig(versioned(2, md5Two))
	if v2 := mustDecide(t, l, Request{Key: k, Member: "c"}).LimitsVersion; v2 != md5Two {
		t.Fatalf("versions %q then %q, want the second %q", v1, v2, md5Two)
	}
	l.SetConfig(versioned(2, md5Two))
	if v := mustDecide(t, l, Request{Key: Key{BizType: "OTHER", Channel: "ALIPAY"}, Member: "d"}).LimitsVersion; v != md5Two {
		t.Fatalf("the same document again: version %q, want %q", v, md5Two)
	}

	made := func(limit int64) *Config { return versioned(limit, "") }
	l.SetConfig(made(3))
	h3 := mustDecide(t, l, Request{Key: k, Member: "e"}).LimitsVersion
	l.SetConfig(made(4))
	h4 := mustDecide(t, l, Request{Key: k, Member: "f"}).LimitsVersion
	l.SetConfig(made(3))
	if again := mustDecide(t, l, Request{Key: k, Member: "g"}).LimitsVersion; len(h3) != 12 || h3 == h4 || again != h3 {
		t.Fatalf("made in code: %q, %q, %q again, want 12-digit hashes that follow the content", h3, h4, again)
	}
}
