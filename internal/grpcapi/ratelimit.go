// Package grpcapi serves Envoy's rate limit protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// on payserver's limiter: Envoy, or any gateway with Envoy's rate-limit
// filter, enforces payserver's exact sliding windows with the same keys,
// members and counts as POST /pay and /v1/limits.
//
// Mapping:
//   - Each descriptor names one key with the entries "bizType" and
//     "channel" (required) and may name the member with "request_id" and
//     the merchant with "merchant" (checked against the limits per
//     merchant; without it, the merchant "-" there). Any other entry is INVALID_ARGUMENT: a descriptor the service cannot
//     key must not be silently unlimited.
//   - hits_addend (the descriptor's, else the request's; 0 means 1) is the
//     count of hits. With request_id it must be 1 (one request is one
//     member; a retried request_id is never counted twice). Without it,
//     each hit gets a fresh unique member.
//   - A payment: a "currency" entry (ISO 4217) makes hits_addend the
//     payment's amount in minor units, counted by the rule's amount windows
//     of that currency (and by its count windows as one request); it needs
//     a request_id entry.
//   - is_negative_hits with request_id releases that member, like POST
//     /v1/limits/release.
//   - A descriptor's limit override is ignored: payserver's limits document
//     decides.
//   - A limiter failure, a lost answer included, is UNAVAILABLE, settled
//     by the gateway's failure mode (Options.FailureModeDeny).
//   - The answer is OK when every descriptor is admitted, else OVER_LIMIT;
//     then the slots this call took are given back, since the request does
//     not go ahead. Each status carries the binding window's limit
//     (current_limit; unit SECOND, MINUTE, HOUR or DAY when the window is
//     one such unit, else the unit with unit_multiplier, and name
//     "LIMIT/WINDOW"), limit_remaining, and duration_until_reset: the time
//     until the window has room when refused, the window's length when
//     admitted.
//
// Callers authenticate with a client token (PAYSERVER_CLIENT_TOKENS) in
// the "authorization" metadata, "Bearer <token>", as on /v1/limits. The
// token is checked from the call's headers, before its message is read;
// a message is at most MaxMessageBytes and MaxDescriptors descriptors, and
// a connection carries at most MaxStreams calls at once (NewGRPCServer).
package grpcapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"payserver/internal/apperr"
	"payserver/internal/authguard"
	"payserver/internal/limitapi"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelog"
)

// MaxHits bounds hits_addend for count windows.
const MaxHits = 1000

// MaxDescriptors bounds the descriptors of one request.
const MaxDescriptors = 16

// MaxMessageBytes bounds one request message: 16 descriptors of the
// longest entries fit many times over. A larger one is RESOURCE_EXHAUSTED,
// never decoded.
const MaxMessageBytes = 64 << 10

// MaxStreams bounds the concurrent calls of one connection; more wait for
// a free stream (HTTP/2 flow control), taking no memory of the server's.
const MaxStreams = 32

// Service is what the server needs. *limitapi.Service implements it.
type Service interface {
	Decide(ctx context.Context, client string, r limitapi.AcquireRequest) (limitapi.Acquired, error)
	Release(ctx context.Context, client string, r limitapi.ReleaseRequest) error
	Undo(ctx context.Context, client string, key ratelimit.Key, member, merchant string) error
	// ReleaseLater hands a member whose check's answer was lost to the
	// ledger, which releases it after a grace unless its requestId is
	// admitted again meanwhile.
	ReleaseLater(client string, h ratelimit.Hold)
}

// Options configures a Server. The zero value is Envoy's defaults.
type Options struct {
	// FailureModeDeny says the gateway refuses a request when the rate
	// limit service fails, as Envoy's ratelimit filter does with
	// failure_mode_deny true. Its default, false, lets the request
	// through: the slots a failed call took stay counted, as if admitted.
	// With true they are given back: those taken before the failure at
	// once, the member of a lost limiter answer after its grace
	// (limitapi.LostAnswerGrace), unless it is admitted again.
	FailureModeDeny bool
	// AuthGuard counts failed authentications per peer address and
	// refuses an address past its budget (RESOURCE_EXHAUSTED) before its
	// token is looked at. Share the HTTP API's. Default: a guard of the
	// server's own.
	AuthGuard *authguard.Guard
}

// Authenticator returns the client name of a bearer token, false when the
// token is no client's.
type Authenticator func(token string) (name string, ok bool)

// Server implements rlsv3.RateLimitServiceServer.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	svc  Service
	auth Authenticator
	log  *slog.Logger
	opts Options
	// authLog rate-limits the log lines of refused tokens, as the HTTP
	// API's, so a scan cannot flood the log.
	authLog *ratelog.Limiter
}

// Refused tokens are logged at most this often after a burst.
const (
	authLogEvery = 10 * time.Second
	authLogBurst = 5
)

// NewServer returns a Server. No argument may be nil.
func NewServer(svc Service, auth Authenticator, log *slog.Logger, opts Options) (*Server, error) {
	if svc == nil || auth == nil || log == nil {
		return nil, errors.New("grpcapi: nil dependency")
	}
	if opts.AuthGuard == nil {
		opts.AuthGuard = authguard.New(authguard.Options{})
	}
	return &Server{svc: svc, auth: auth, log: log, opts: opts, authLog: ratelog.New(authLogEvery, authLogBurst)}, nil
}

// Register adds the service to g. A server of its own with the limits
// that keep a hostile caller from exhausting memory is NewGRPCServer's.
func (s *Server) Register(g *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(g, s) }

// NewGRPCServer returns a gRPC server serving s, which:
//   - checks the client token from the call's headers, before its message
//     is read: a call without a valid one is UNAUTHENTICATED having cost
//     the server no more than its headers, and counts against its
//     address's budget of failures (Options.AuthGuard): past it, the
//     address is RESOURCE_EXHAUSTED until its minute is over;
//   - refuses a message over MaxMessageBytes (RESOURCE_EXHAUSTED);
//   - runs at most MaxStreams calls at once on one connection.
func (s *Server) NewGRPCServer() *grpc.Server {
	g := grpc.NewServer(
		grpc.InTapHandle(s.tap),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(MaxStreams),
	)
	s.Register(g)
	return g
}

// clientCtxKey is the context key of the client the tap authenticated.
type clientCtxKey struct{}

// tap authenticates a call from its headers, before its message is read,
// and hands the client's name to the handler in the context.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	var addr string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if wait := s.opts.AuthGuard.Blocked(addr); wait > 0 {
		s.opts.AuthGuard.Refused("grpc")
		return ctx, status.Errorf(codes.ResourceExhausted, "too many failed authentications from this address; try again in %d s", apperr.Ceil(wait, time.Second))
	}
	name, err := s.authenticate(info.Header)
	if err != nil {
		if len(info.Header.Get("authorization")) > 0 {
			s.opts.AuthGuard.Failed(addr, "grpc")
		}
		return ctx, err
	}
	return context.WithValue(ctx, clientCtxKey{}, name), nil
}

// hit is one descriptor, validated.
type hit struct {
	key      ratelimit.Key
	member   string // "" when the descriptor named none
	merchant string // "" when the descriptor named none
	hits     uint64
	negative bool
	// currency, when set, makes the descriptor one payment of amount
	// (hits_addend) in it.
	currency string
	amount   int64
}

// ShouldRateLimit implements the rate limit service.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	client, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	hits, err := parse(req)
	if err != nil {
		return nil, err
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	var took []taken
	// ours: members this call took a slot for, per channel. A later
	// descriptor of the same member on that channel is a duplicate only in
	// the windows an earlier one shares with it (the channel-wide key), and
	// may have taken its own key's windows: it is given back too. A member
	// held on a channel before this call (a retried request) is not ours to
	// give back there.
	ours := map[taken]bool{} // by member and channel (key.BizType and merchant empty)
	for _, h := range hits {
		if h.negative {
			// A member no window holds is OK too: the protocol has no
			// per-descriptor "not found", and failing the whole call
			// would fail the gateway's request for a release that
			// changed nothing.
			err := s.svc.Release(ctx, client, limitapi.ReleaseRequest{Key: h.key, RequestID: h.member, MerchantID: h.merchant})
			if err != nil && apperr.CodeOf(err) != apperr.SlotNotFound {
				return nil, toStatus(err)
			}
			resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
			continue
		}
		var st *rlsv3.RateLimitResponse_DescriptorStatus
		for i := uint64(0); i < h.hits; i++ {
			member := h.member
			if member == "" {
				member = uniqueMember()
			}
			a, err := s.svc.Decide(ctx, client, limitapi.AcquireRequest{Key: h.key, RequestID: member, Amount: h.amount, Currency: h.currency, MerchantID: h.merchant})
			if err != nil {
				// UNAVAILABLE (a lost answer included, never OVER_LIMIT):
				// the gateway answers it by its failure mode. When that
				// lets the request through (failure_mode_deny false, its
				// default) the channel is called under the slots taken so
				// far, and the one the lost call may have taken: they are
				// kept, and free themselves when their windows pass. When
				// it refuses the request, they are given back.
				if s.opts.FailureModeDeny {
					s.undo(client, took)
					if a.Decision.Unknown {
						s.svc.ReleaseLater(client, a.Decision.Hold)
					}
				}
				return nil, toStatus(err)
			}
			if a.Decision.Conflict {
				// The member is held for another amount: the request
				// changed its payload. Nothing of this call goes ahead.
				s.undo(client, took)
				return nil, status.Error(codes.AlreadyExists, pay.ConflictError(h.key, member, h.amount).Message)
			}
			st = descriptorStatus(a.Decision)
			if !a.Decision.Allowed {
				break
			}
			// The request's slot, whichever merchant the descriptor names.
			mine := taken{key: ratelimit.Key{Channel: h.key.Channel}, member: member}
			if a.Decision.Source != ratelimit.SourceUnlimited && (!a.Decision.Duplicate || ours[mine]) {
				took = append(took, taken{h.key, member, h.merchant})
				ours[mine] = true
			}
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		// The request does not go ahead: no channel call can happen for
		// the slots this call took.
		s.undo(client, took)
	}
	s.log.Debug("rate limit check", "client", client, "domain", req.GetDomain(), "code", resp.OverallCode.String())
	return resp, nil
}

// taken is a slot a check took.
type taken struct {
	key      ratelimit.Key
	member   string
	merchant string
}

func (s *Server) undo(client string, took []taken) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, t := range took {
		if err := s.svc.Undo(ctx, client, t.key, t.member, t.merchant); err != nil {
			s.log.Warn("could not give back a slot of a refused rate limit check; it frees itself when the window passes",
				"client", client, "key", t.key.String(), "err", err)
		}
	}
}

// client is the call's client: the one the tap authenticated, else (a
// server without the tap) the one its "authorization" metadata names.
func (s *Server) client(ctx context.Context) (string, error) {
	if name, ok := ctx.Value(clientCtxKey{}).(string); ok {
		return name, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return s.authenticate(md)
}

// authenticate names the client of the "authorization" metadata.
func (s *Server) authenticate(md metadata.MD) (string, error) {
	for _, v := range md.Get("authorization") {
		const scheme = "bearer "
		if len(v) > len(scheme) && strings.EqualFold(v[:len(scheme)], scheme) {
			if name, ok := s.auth(v[len(scheme):]); ok {
				return name, nil
			}
		}
	}
	if ok, suppressed := s.authLog.Allow(); ok {
		s.log.Warn("rate limit check refused: no valid client token", "suppressedSinceLast", suppressed)
	}
	return "", status.Error(codes.Unauthenticated, "a valid client bearer token is required in the authorization metadata (PAYSERVER_CLIENT_TOKENS)")
}

// parse validates the request into hits; any problem is INVALID_ARGUMENT
// naming the descriptor and entry.
func parse(req *rlsv3.RateLimitRequest) ([]hit, error) {
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return nil, invalid("descriptors: at least one is required")
	}
	if len(ds) > MaxDescriptors {
		return nil, invalid("descriptors: at most %d are allowed", MaxDescriptors)
	}
	out := make([]hit, 0, len(ds))
	for i, d := range ds {
		h, err := parseDescriptor(d, req.GetHitsAddend())
		if err != nil {
			return nil, invalid("descriptors[%d]: %s", i, err)
		}
		out = append(out, h)
	}
	return out, nil
}

func parseDescriptor(d *commonv3.RateLimitDescriptor, requestHits uint32) (hit, error) {
	var h hit
	seen := map[string]bool{}
	for _, e := range d.GetEntries() {
		if seen[e.GetKey()] {
			return h, fmt.Errorf("entry %q: given twice", e.GetKey())
		}
		seen[e.GetKey()] = true
		v := e.GetValue()
		switch e.GetKey() {
		case "bizType":
			if p := ratelimit.BizTypeProblem(v); p != "" {
				return h, fmt.Errorf("entry bizType: %s", p)
			}
			h.key.BizType = v
		case "channel":
			if p := ratelimit.CodeProblem(v); p != "" {
				return h, fmt.Errorf("entry channel: %s", p)
			}
			h.key.Channel = v
		case "request_id":
			if p := pay.RequestIDProblem(v); p != "" {
				return h, fmt.Errorf("entry request_id: %s", p)
			}
			h.member = v
		case "currency":
			if p := pay.CurrencyProblem(v); p != "" {
				return h, fmt.Errorf("entry currency: %s", p)
			}
			h.currency = v
		case "merchant":
			if p := ratelimit.MerchantProblem(v); p != "" {
				return h, fmt.Errorf("entry merchant: %s", p)
			}
			h.merchant = v
		default:
			return h, fmt.Errorf("entry %.64q: unknown (want bizType, channel, request_id, currency, merchant)", e.GetKey())
		}
	}
	for _, k := range []string{"bizType", "channel"} {
		if !seen[k] {
			return h, fmt.Errorf("entry %s: is required", k)
		}
	}
	h.hits = uint64(requestHits)
	if d.GetHitsAddend() != nil {
		h.hits = d.GetHitsAddend().GetValue()
	}
	if h.hits == 0 {
		h.hits = 1
	}
	h.negative = d.GetIsNegativeHits()
	if h.currency != "" && !h.negative {
		if h.member == "" {
			return h, errors.New("entry currency: a payment needs a request_id entry")
		}
		if p := pay.AmountProblem(int64(min(h.hits, 1<<62))); p != "" {
			return h, fmt.Errorf("hits_addend: the amount %s", p)
		}
		h.amount, h.hits = int64(h.hits), 1
	}
	switch {
	case h.negative && h.member == "":
		return h, errors.New("is_negative_hits: needs a request_id entry (the member to release)")
	case h.member != "" && h.hits != 1:
		return h, errors.New("hits_addend: must be 1 with a request_id entry (one request is one member)")
	case h.hits > MaxHits:
		return h, fmt.Errorf("hits_addend: must be at most %d", MaxHits)
	}
	return h, nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// toStatus maps an apperr to a gRPC status.
func toStatus(err error) error {
	var e *apperr.Error
	if !errors.As(err, &e) {
		return status.Error(codes.Internal, "internal error")
	}
	switch e.Code {
	case apperr.InvalidRequest:
		return status.Error(codes.InvalidArgument, e.Message)
	case apperr.IdempotencyConflict:
		return status.Error(codes.FailedPrecondition, e.Message)
	case apperr.DependencyUnavailable:
		return status.Error(codes.Unavailable, e.Message)
	case apperr.Forbidden:
		return status.Error(codes.PermissionDenied, e.Message)
	}
	return status.Error(codes.Internal, e.Message)
}

// descriptorStatus renders a decision.
func descriptorStatus(d ratelimit.Decision) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if !d.Allowed {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if d.Source == ratelimit.SourceUnlimited || d.Limit == ratelimit.Unlimited {
		return st
	}
	st.CurrentLimit = currentLimit(d.Limit, d.Window, calendarUnit(d))
	st.LimitRemaining = clampU32(d.Remaining)
	reset := d.Window
	if !d.Allowed {
		reset = d.RetryAfter
		if d.ExceedsCap && !d.Degraded() {
			// No wait makes the amount fit: no reset to wait for.
			return st
		}
	}
	st.DurationUntilReset = durationpb.New(reset)
	return st
}

// calendarUnit is the calendar unit of d's binding window ("day",
// "month"), or "" for a sliding window.
func calendarUnit(d ratelimit.Decision) string {
	if d.Window > 0 {
		return ""
	}
	if i := strings.LastIndexByte(d.Rule, '/'); i >= 0 {
		return d.Rule[i+1:]
	}
	return ""
}

// currentLimit describes a window in Envoy's units: a sliding window by
// its size, a calendar window (calendar "day" or "month") by its unit, DAY
// for a day, UNKNOWN for a month (Envoy has no month).
func currentLimit(limit int64, window time.Duration, calendar string) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            fmt.Sprintf("%d/%s", limit, window),
		RequestsPerUnit: clampU32(limit),
	}
	if calendar != "" {
		rl.Name = fmt.Sprintf("%d/%s", limit, calendar)
		rl.Unit = rlsv3.RateLimitResponse_RateLimit_UNKNOWN
		if calendar == string(ratelimit.CalendarDay) {
			rl.Unit = rlsv3.RateLimitResponse_RateLimit_DAY
		}
		return rl
	}
	for _, u := range []struct {
		size time.Duration
		unit rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY},
		{time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND},
	} {
		if window >= u.size && window%u.size == 0 {
			rl.Unit = u.unit
			if n := window / u.size; n != 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(uint32(n))
			}
			return rl
		}
	}
	rl.Unit = rlsv3.RateLimitResponse_RateLimit_UNKNOWN
	return rl
}

func clampU32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(n)
}

// uniqueMember returns a fresh member for a hit without request_id.
func uniqueMember() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "rls-" + hex.EncodeToString(b[:])
}
