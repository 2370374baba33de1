package grpcapi

import (
	"context"
	"log/slog"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"payserver/internal/apperr"
	"payserver/internal/limitapi"
	"payserver/internal/ratelimit"
)

// lostService answers every Decide as a lost limiter answer, as
// limitapi.Service does.
type lostService struct {
	noService
	settled []string
}

func (s *lostService) Decide(_ context.Context, _ string, r limitapi.AcquireRequest) (limitapi.Acquired, error) {
	return limitapi.LostAnswer(r, ratelimit.Decision{Key: r.Key, Unknown: true, Hold: ratelimit.HoldOf(r.Key, r.RequestID)})
}

func (s *lostService) ReleaseLater(_ string, h ratelimit.Hold) {
	s.settled = append(s.settled, h.Member)
}

// TestLostAnswerIsUnavailable: a check whose limiter answer was lost is
// UNAVAILABLE, never OVER_LIMIT, so the gateway applies its failure mode.
// By default (failure_mode_deny false, the request goes ahead) the member
// stays counted; with FailureModeDeny it is released later.
func TestLostAnswerIsUnavailable(t *testing.T) {
	for _, deny := range []bool{false, true} {
		svc := &lostService{}
		s, err := NewServer(svc, func(string) (string, bool) { return "jobs", true }, slog.New(slog.DiscardHandler), Options{FailureModeDeny: deny})
		if err != nil {
			t.Fatal(err)
		}
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer t"))
		resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B", "request_id", "r1")}})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("deny %v: got %v, %v; want UNAVAILABLE", deny, resp.GetOverallCode(), err)
		}
		if want := map[bool]int{false: 0, true: 1}[deny]; len(svc.settled) != want {
			t.Errorf("deny %v: %d members released later, want %d", deny, len(svc.settled), want)
		}
	}
}

// TestErrorCodes: a scope refusal is PERMISSION_DENIED, a limiter failure
// UNAVAILABLE.
func TestErrorCodes(t *testing.T) {
	for code, want := range map[apperr.Code]codes.Code{
		apperr.Forbidden:             codes.PermissionDenied,
		apperr.DependencyUnavailable: codes.Unavailable,
		apperr.InvalidRequest:        codes.InvalidArgument,
	} {
		if got := status.Code(toStatus(apperr.New(code, "x"))); got != want {
			t.Errorf("%s: got %s, want %s", code, got, want)
		}
	}
}
