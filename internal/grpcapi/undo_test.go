package grpcapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"payserver/internal/limitapi"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// TestOverLimitGivesBackSlotsTakenUnderASharedWindow: one request's
// descriptors of one member on two keys of a channel share the
// channel-wide window, so the second is a duplicate there but takes its own
// key's windows. When a third descriptor is over its limit, the request
// does not go ahead: both keys' slots are given back, not only the first's.
func TestOverLimitGivesBackSlotsTakenUnderASharedWindow(t *testing.T) {
	l, s, ctx := rlsOn(t, "limits:\n  A:C: 5\n  B:C: 5\n  D:C: [{limit: 1, window: 1m}]\n  \"*:C\": 10\n")
	// D:C is full.
	if _, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "D", "channel", "C", "request_id", "other")}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{
		desc("bizType", "A", "channel", "C", "request_id", "r1"),
		desc("bizType", "B", "channel", "C", "request_id", "r1"),
		desc("bizType", "D", "channel", "C", "request_id", "r1"),
	}})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("got %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	for _, k := range []ratelimit.Key{{BizType: "A", Channel: "C"}, {BizType: "B", Channel: "C"}} {
		if _, counts, err := l.Usage(context.Background(), k); err != nil || counts[0] != 0 {
			t.Errorf("%s holds %v (%v) after the request was refused, want 0: its slot given back", k, counts, err)
		}
	}
}

// TestOverLimitGivesBackSlotsOfOneRequestUnderTwoMerchants: the same, with
// each of the request's descriptors naming another merchant. The slots are
// the request's whichever merchant each names: both keys' are given back.
func TestOverLimitGivesBackSlotsOfOneRequestUnderTwoMerchants(t *testing.T) {
	l, s, ctx := rlsOn(t, "limits:\n  A:C: 5\n  B:C: 5\n  D:C: [{limit: 1, window: 1m}]\n  \"*:C\": 10\n")
	if _, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "D", "channel", "C", "request_id", "other")}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{
		desc("bizType", "A", "channel", "C", "request_id", "r1", "merchant", "X"),
		desc("bizType", "B", "channel", "C", "request_id", "r1", "merchant", "Y"),
		desc("bizType", "D", "channel", "C", "request_id", "r1", "merchant", "X"),
	}})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("got %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	for k, want := range map[ratelimit.Key]int64{{BizType: "A", Channel: "C"}: 0, {BizType: "B", Channel: "C"}: 0, ratelimit.ChannelWide("C"): 1} {
		if _, counts, err := l.Usage(context.Background(), k); err != nil || counts[0] != want {
			t.Errorf("%s holds %v (%v) after the request was refused, want %d: its slot given back (the channel keeps D's other)", k, counts, err, want)
		}
	}
}

// TestOverLimitKeepsASlotHeldBeforeTheCall: a retried request whose member
// still holds a slot on one channel (from its first call) and takes a fresh
// one on another gives back only what it took when it is over a limit: the
// first call's slot stays.
func TestOverLimitKeepsASlotHeldBeforeTheCall(t *testing.T) {
	l, s, ctx := rlsOn(t, "limits:\n  P:C1: [{limit: 5, window: 1s}]\n  P:C2: [{limit: 5, calendar: day}]\n  D:C3: [{limit: 1, window: 1m}]\n")
	first := []*commonv3.RateLimitDescriptor{desc("bizType", "P", "channel", "C1", "request_id", "m"), desc("bizType", "P", "channel", "C2", "request_id", "m")}
	if resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: first}); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first call: %v, %v", resp.GetOverallCode(), err)
	}
	if _, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "D", "channel", "C3", "request_id", "other")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // C1's window lets m go; C2's day keeps it
	resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: append(first, desc("bizType", "D", "channel", "C3", "request_id", "m"))})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("retry: %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	if _, counts, err := l.Usage(context.Background(), ratelimit.Key{BizType: "P", Channel: "C2"}); err != nil || counts[0] != 1 {
		t.Errorf("P:C2 holds %v (%v) after the refused retry, want 1: the first call's slot", counts, err)
	}
}

// rlsOn returns a limiter on the in-process store with doc in force, the
// rate limit service over it, and a context carrying a client token.
func rlsOn(t *testing.T, doc string) (*ratelimit.Limiter, *Server, context.Context) {
	t.Helper()
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	ledger, err := pay.NewLedger(nil, l, pay.LedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := limitapi.NewService(limitapi.Options{Admit: l, Peek: l, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(svc, func(string) (string, bool) { return "jobs", true }, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l, s, metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer t"))
}

// TestNegativeHitsOfAMemberNotHeldAreOK: is_negative_hits of a request_id
// no window holds for the client (another client's, or released before)
// answers OK and changes nothing: the protocol has no per-descriptor "not
// found", and failing the call would fail the gateway's request.
func TestNegativeHitsOfAMemberNotHeldAreOK(t *testing.T) {
	l, s, ctx := rlsOn(t, "limits:\n  A:C: [{limit: 5, window: 1m}]\n")
	if resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "C", "request_id", "r1")}}); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("acquire r1: %v, %v", resp.GetOverallCode(), err)
	}
	release := desc("bizType", "A", "channel", "C", "request_id", "r1")
	release.IsNegativeHits = true
	for i := range 2 {
		resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{release}})
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("release #%d of r1: %v, %v; want OK", i+1, resp.GetOverallCode(), err)
		}
		if _, counts, err := l.Usage(context.Background(), ratelimit.Key{BizType: "A", Channel: "C"}); err != nil || counts[0] != 0 {
			t.Fatalf("after release #%d the window holds %v (%v), want 0", i+1, counts, err)
		}
	}
}
