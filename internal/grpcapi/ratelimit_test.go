package grpcapi

import (
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"payserver/internal/ratelimit"
)

func TestCurrentLimitUnits(t *testing.T) {
	for _, tc := range []struct {
		window   time.Duration
		unit     rlsv3.RateLimitResponse_RateLimit_Unit
		multiple uint32 // 0: none
	}{
		{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND, 0},
		{10 * time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND, 10},
		{time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE, 0},
		{90 * time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND, 90},
		{2 * time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR, 2},
		{24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY, 0},
		{500 * time.Millisecond, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 0},
	} {
		t.Run(tc.window.String(), func(t *testing.T) {
			got := currentLimit(7, tc.window, "")
			if got.GetUnit() != tc.unit || got.GetUnitMultiplier().GetValue() != tc.multiple || got.GetRequestsPerUnit() != 7 {
				t.Errorf("got %s x%d (%d), want %s x%d", got.GetUnit(), got.GetUnitMultiplier().GetValue(), got.GetRequestsPerUnit(), tc.unit, tc.multiple)
			}
		})
	}
	// Calendar windows have no size: named by their unit.
	for _, tc := range []struct {
		calendar, name string
		unit           rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{"day", "7/day", rlsv3.RateLimitResponse_RateLimit_DAY},
		{"month", "7/month", rlsv3.RateLimitResponse_RateLimit_UNKNOWN},
	} {
		got := currentLimit(7, 0, tc.calendar)
		if got.GetName() != tc.name || got.GetUnit() != tc.unit {
			t.Errorf("calendar %s: got %q %s, want %q %s", tc.calendar, got.GetName(), got.GetUnit(), tc.name, tc.unit)
		}
	}
}

func desc(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func TestParse(t *testing.T) {
	withHits := desc("bizType", "A", "channel", "B")
	withHits.HitsAddend = wrapperspb.UInt64(5)
	h, err := parse(&rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{withHits, desc("channel", "B", "bizType", "A", "request_id", "r-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if h[0].hits != 5 || h[0].member != "" || h[1].hits != 1 || h[1].member != "r-1" || h[1].key.String() != "A:B" {
		t.Errorf("got %+v", h)
	}
	if h, _ := parse(&rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B")}}); h[0].hits != 1 {
		t.Errorf("hits_addend 0: got %d hits, want 1", h[0].hits)
	}
	// A payment: hits_addend is its amount, counted once as a request.
	h, err = parse(&rlsv3.RateLimitRequest{HitsAddend: 1999, Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "request_id", "p-1", "currency", "CNY")}})
	if err != nil || h[0].hits != 1 || h[0].amount != 1999 || h[0].currency != "CNY" {
		t.Errorf("payment: got %+v, %v; want one hit of 1999 CNY", h, err)
	}
	h, err = parse(&rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "request_id", "p-2", "merchant", "M1")}})
	if err != nil || h[0].merchant != "M1" {
		t.Errorf("merchant: got %+v, %v; want merchant M1", h, err)
	}
	negative := desc("bizType", "A", "channel", "B")
	negative.IsNegativeHits = true
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"none":             {},
		"missing bizType":  {Descriptors: []*commonv3.RateLimitDescriptor{desc("channel", "B")}},
		"unknown entry":    {Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "path", "/x")}},
		"negative, no id":  {Descriptors: []*commonv3.RateLimitDescriptor{negative}},
		"hits with an id":  {HitsAddend: 2, Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "request_id", "x")}},
		"too many hits":    {HitsAddend: MaxHits + 1, Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B")}},
		"bad channel code": {Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "")}},
		"payment, no id":   {HitsAddend: 1999, Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "currency", "CNY")}},
		"empty merchant":   {Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "merchant", "")}},
		"bad currency":     {HitsAddend: 1999, Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "request_id", "x", "currency", "XXQ")}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parse(req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("got %v, want INVALID_ARGUMENT", err)
			}
		})
	}
}

// TestExceedsCapHasNoReset: an amount that can never fit its cap is
// OVER_LIMIT with no duration until reset: no wait helps.
func TestExceedsCapHasNoReset(t *testing.T) {
	st := descriptorStatus(ratelimit.Decision{Limit: 1000, Window: time.Second, Amount: true, ExceedsCap: true, RetryAfter: 3 * time.Second, Source: ratelimit.SourceRedis})
	if st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT || st.GetDurationUntilReset() != nil {
		t.Fatalf("got %v reset %v, want OVER_LIMIT with no reset", st.GetCode(), st.GetDurationUntilReset())
	}
}
