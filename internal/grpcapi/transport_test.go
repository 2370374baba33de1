package grpcapi

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serve starts s on a loopback listener and returns a client of it.
func serve(t *testing.T, s *Server) rlsv3.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.NewGRPCServer()
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// hugeRequest is a request of about size bytes of small descriptors.
func hugeRequest(size int) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "x"}
	for n := 0; n < size; n += 10 {
		req.Descriptors = append(req.Descriptors, &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}})
	}
	return req
}

func tokenAuth(token string) (string, bool) {
	if token == "good-token-0123456789" {
		return "jobs", true
	}
	return "", false
}

// TestNoTokenIsRefusedBeforeTheMessageIsRead: a 4 MB request (about 380,000 descriptors) without a
// token is refused Unauthenticated from its headers, so the server never
// decodes it: the process allocates far less than decoding 400,000
// descriptors takes.
func TestNoTokenIsRefusedBeforeTheMessageIsRead(t *testing.T) {
	s, err := NewServer(noService{}, tokenAuth, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	req := hugeRequest(3 << 20) // under gRPC's default 4 MB cap
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = c.ShouldRateLimit(context.Background(), req)
	runtime.ReadMemStats(&after)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("got %v, want Unauthenticated", err)
	}
	// The client's own encoding takes about 4 MB; decoding on the server
	// would take tens of MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("a refused 4 MB call allocated %d MB, want under 16 MB: the message was read before the token was checked", got>>20)
	}
}

// TestMessageSizeIsCapped: an authenticated request over MaxMessageBytes
// is ResourceExhausted, never decoded.
func TestMessageSizeIsCapped(t *testing.T) {
	s, err := NewServer(noService{}, tokenAuth, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer good-token-0123456789")
	_, err = c.ShouldRateLimit(ctx, hugeRequest(MaxMessageBytes+1024))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("got %v, want ResourceExhausted for a message over %d bytes", err, MaxMessageBytes)
	}
}

// TestFailedTokensAreSlowed: after 10 calls with a wrong token from one
// address within a minute, that address is refused RESOURCE_EXHAUSTED,
// even with the right token.
func TestFailedTokensAreSlowed(t *testing.T) {
	s, err := NewServer(noService{}, tokenAuth, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	req := &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("bizType", "A", "channel", "B")}}
	bad := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer wrong-token-0123456789")
	for i := range 10 {
		if _, err := c.ShouldRateLimit(bad, req); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("wrong token %d: got %v, want Unauthenticated", i+1, err)
		}
	}
	good := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer good-token-0123456789")
	if _, err := c.ShouldRateLimit(good, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the right token after 10 failures: got %v, want ResourceExhausted", err)
	}
}
