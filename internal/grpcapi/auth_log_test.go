package grpcapi

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"payserver/internal/limitapi"
	"payserver/internal/ratelimit"
)

type noService struct{}

func (noService) Decide(context.Context, string, limitapi.AcquireRequest) (limitapi.Acquired, error) {
	return limitapi.Acquired{}, nil
}
func (noService) Release(context.Context, string, limitapi.ReleaseRequest) error    { return nil }
func (noService) Undo(context.Context, string, ratelimit.Key, string, string) error { return nil }
func (noService) ReleaseLater(string, ratelimit.Hold)                               {}

// TestRefusedTokensAreLoggedRateLimited: a scan of bad tokens logs a burst,
// then nothing more within the interval, as the HTTP API does.
func TestRefusedTokensAreLoggedRateLimited(t *testing.T) {
	var buf bytes.Buffer
	s, err := NewServer(noService{}, func(string) (string, bool) { return "", false }, slog.New(slog.NewTextHandler(&buf, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer wrong"))
	for range 50 {
		if _, err := s.client(ctx); err == nil {
			t.Fatal("a bad token was accepted")
		}
	}
	if n := strings.Count(buf.String(), "no valid client token"); n > authLogBurst {
		t.Errorf("%d log lines for 50 refused calls, want at most %d", n, authLogBurst)
	}
}
