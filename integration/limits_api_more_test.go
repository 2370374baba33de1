package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/payserver/payserver/api/client"
	"payserver/internal/testutil"
)

// TestLimitsAPIAuth: /v1/limits needs a client token; the admin token, a
// wrong one or none get 401 JSON; the client's name is logged, its token
// never; the per-caller report and metrics show the clients beside POST
// /pay.
func TestLimitsAPIAuth(t *testing.T) {
	biz := testutil.UniqueName("AUTH")
	// Every refusal is tried from this one address: more than the default
	// budget of failed authentications (TestAuthFailuresAreThrottled).
	s := startServer(t, serverOptions{Env: limitsEnv(map[string]string{"PAYSERVER_ADMIN_TOKEN": adminTok, "PAYSERVER_LOG_LEVEL": "debug",
		"PAYSERVER_AUTH_MAX_FAILURES": "1000000"})})
	body, _ := json.Marshal(slot(biz, "ALIPAY", "auth-1"))
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"no header", nil},
		{"admin token", bearer(adminTok)},
		{"wrong token", bearer(refundsToken + "x")},
		{"token prefix", bearer(refundsToken[:10])},
		{"basic scheme", http.Header{"Authorization": {"Basic " + refundsToken}}},
		{"empty bearer", http.Header{"Authorization": {"Bearer "}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rt := range []struct{ method, path string }{
				{http.MethodPost, "/v1/limits/acquire"}, {http.MethodPost, "/v1/limits/release"},
				{http.MethodGet, "/v1/limits/peek?bizType=" + biz + "&channel=ALIPAY"},
			} {
				var b []byte
				if rt.method == http.MethodPost {
					b = body
				}
				r := s.do(t, rt.method, rt.path, b, tc.header)
				if r.Status != 401 || r.JSON(t)["code"] != "UNAUTHORIZED" {
					t.Errorf("%s %s: %d %s, want 401 UNAUTHORIZED", rt.method, rt.path, r.Status, r.Body)
				}
			}
		})
	}
	// The client token does not open admin routes either.
	if r := s.do(t, http.MethodGet, "/limits", nil, bearer(refundsToken)); r.Status != 401 {
		t.Errorf("GET /limits with a client token: %d, want 401", r.Status)
	}
	if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "auth-1")); r.Status != 200 {
		t.Fatalf("acquire with the refunds token: %d %s", r.Status, r.Body)
	}
	if r := s.pay(t, payBody("auth-pay-1", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	logs := s.logs()
	if !strings.Contains(logs, `"client":"refunds"`) {
		t.Errorf("the logs never name the client refunds")
	}
	for _, secret := range []string{refundsToken, payoutsToken, adminTok} {
		if strings.Contains(logs, secret) {
			t.Errorf("a token appears in the logs")
		}
	}
	rep := s.do(t, http.MethodGet, "/reports/limit-callers", nil, bearer(adminTok))
	if rep.Status != 200 {
		t.Fatalf("GET /reports/limit-callers: %d %s", rep.Status, rep.Body)
	}
	got := map[string]float64{}
	for _, c := range rep.JSON(t)["callers"].([]any) {
		m := c.(map[string]any)
		got[m["caller"].(string)] = m["acquired"].(float64)
	}
	if got["refunds"] != 1 || got["pay"] != 1 {
		t.Errorf("acquisitions per caller %v, want refunds 1 and pay 1", got)
	}
	dash := s.do(t, http.MethodGet, "/dashboard", nil, bearer(adminTok))
	if !strings.Contains(string(dash.Body), `id="callers"`) || !strings.Contains(string(dash.Body), ">refunds<") || !strings.Contains(string(dash.Body), ">pay<") {
		t.Errorf("the dashboard does not show the callers refunds and pay")
	}
	metrics := s.do(t, http.MethodGet, "/metrics", nil, bearer(adminTok))
	for _, want := range []string{
		`payserver_limit_calls_total{client="refunds",op="acquire",result="admitted"} 1`,
		`payserver_limit_calls_total{client="pay",op="acquire",result="admitted"} 1`,
	} {
		if !strings.Contains(string(metrics.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestLimitsAPIBadInput: every malformed request is 400 naming the field,
// never 5xx, on each route; maxWaitMs is checked on POST /pay too.
func TestLimitsAPIBadInput(t *testing.T) {
	s := startServer(t, serverOptions{Env: limitsEnv(nil)})
	for _, tc := range []struct {
		name, method, path, body string
		field                    string
	}{
		{"not JSON", "POST", "/v1/limits/acquire", `{`, "body"},
		{"array", "POST", "/v1/limits/acquire", `[]`, "body"},
		{"missing requestId", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B"}`, "requestId"},
		{"bad requestId", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"a b"}`, "requestId"},
		{"lower-case bizType", "POST", "/v1/limits/acquire", `{"bizType":"a","channel":"B","requestId":"x"}`, "bizType"},
		{"numeric channel", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":7,"requestId":"x"}`, "channel"},
		{"amount zero", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","amount":0}`, "amount"},
		{"amount fraction", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","amount":1.5}`, "amount"},
		{"bad currency", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","currency":"cny"}`, "currency"},
		{"maxWaitMs too big", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":30001}`, "maxWaitMs"},
		{"maxWaitMs negative", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":-1}`, "maxWaitMs"},
		{"unknown field", "POST", "/v1/limits/acquire", `{"bizType":"A","channel":"B","requestId":"x","merchant":"M"}`, "merchant"},
		{"release missing channel", "POST", "/v1/limits/release", `{"bizType":"A","requestId":"x"}`, "channel"},
		{"release maxWaitMs", "POST", "/v1/limits/release", `{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":1}`, "maxWaitMs"},
		{"peek missing bizType", "GET", "/v1/limits/peek?channel=B", "", "bizType"},
		{"peek bad amount", "GET", "/v1/limits/peek?bizType=A&channel=B&amount=x", "", "amount"},
		{"peek repeated channel", "GET", "/v1/limits/peek?bizType=A&channel=B&channel=C", "", "channel"},
		{"peek unknown parameter", "GET", "/v1/limits/peek?bizType=A&channel=B&foo=1", "", "foo"},
		{"pay maxWaitMs too big", "POST", "/pay", `{"requestId":"x","bizType":"A","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","maxWaitMs":40000}`, "maxWaitMs"},
		{"pay maxWaitMs string", "POST", "/pay", `{"requestId":"x","bizType":"A","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","maxWaitMs":"5"}`, "maxWaitMs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.method == "POST" {
				body = []byte(tc.body)
			}
			r := s.do(t, tc.method, tc.path, body, bearer(refundsToken))
			if r.Status != 400 {
				t.Fatalf("got %d %s, want 400", r.Status, r.Body)
			}
			fields, _ := r.JSON(t)["details"].(map[string]any)["fields"].([]any)
			named := false
			for _, f := range fields {
				named = named || f.(map[string]any)["field"] == tc.field
			}
			if !named {
				t.Errorf("400 does not name field %s: %s", tc.field, r.Body)
			}
		})
	}
}

// rlsClient returns an Envoy rate limit client on s's gRPC address.
func rlsClient(t *testing.T, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func descriptor(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withToken(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// TestLimitsGRPCEqualsHTTP: the same sequence of requests through Envoy's
// rate limit protocol (the generated Go client) and through
// /v1/limits/acquire, on two keys with the same rule, gets the same
// answers: admitted or not, limit, remaining. Both share one key's windows
// with POST /pay's members. Bad descriptors are INVALID_ARGUMENT.
func TestLimitsGRPCEqualsHTTP(t *testing.T) {
	bizHTTP, bizGRPC, bizBoth := testutil.UniqueName("VIAHTTP"), testutil.UniqueName("VIAGRPC"), testutil.UniqueName("BOTH")
	grpcAddr := freePort(t)
	s := startServer(t, serverOptions{
		Env: limitsEnv(map[string]string{"PAYSERVER_GRPC_ADDR": grpcAddr}),
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 3, window: 1m}\n  %s:ALIPAY: {limit: 3, window: 1m}\n  %s:ALIPAY: {limit: 3, window: 1m}\n",
			bizHTTP, bizGRPC, bizBoth),
	})
	rls := rlsClient(t, grpcAddr)
	ids := []string{"e-1", "e-2", "e-1", "e-3", "e-4", "e-5"}
	for i, id := range ids {
		h := s.acquire(t, refundsToken, slot(bizHTTP, "ALIPAY", id))
		g, err := rls.ShouldRateLimit(withToken(refundsToken), &rlsv3.RateLimitRequest{
			Domain:      "payserver",
			Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", bizGRPC, "channel", "ALIPAY", "request_id", id)},
		})
		if err != nil {
			t.Fatalf("step %d: gRPC: %v", i, err)
		}
		httpOK, grpcOK := h.Status == 200, g.GetOverallCode() == rlsv3.RateLimitResponse_OK
		if httpOK != grpcOK {
			t.Fatalf("step %d (%s): HTTP %d, gRPC %s: they disagree", i, id, h.Status, g.GetOverallCode())
		}
		st := g.GetStatuses()[0]
		var limit, remaining float64
		if httpOK {
			w := h.JSON(t)["windows"].([]any)[0].(map[string]any)
			limit, remaining = w["limit"].(float64), w["remaining"].(float64)
		} else {
			d := h.JSON(t)["details"].(map[string]any)
			limit, remaining = d["limit"].(float64), 0
			ra := time.Duration(d["retryAfterMs"].(float64)) * time.Millisecond
			if gra := st.GetDurationUntilReset().AsDuration(); gra <= 0 || gra > time.Minute || (ra-gra).Abs() > 5*time.Second {
				t.Errorf("step %d: gRPC duration_until_reset %v, HTTP retryAfter %v", i, gra, ra)
			}
		}
		if float64(st.GetCurrentLimit().GetRequestsPerUnit()) != limit || float64(st.GetLimitRemaining()) != remaining {
			t.Errorf("step %d: gRPC limit %d remaining %d, HTTP limit %v remaining %v", i,
				st.GetCurrentLimit().GetRequestsPerUnit(), st.GetLimitRemaining(), limit, remaining)
		}
		if u := st.GetCurrentLimit().GetUnit(); u != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Errorf("step %d: unit %s, want MINUTE for a 1m window", i, u)
		}
	}
	// One key, both protocols, one client: a member admitted over HTTP is
	// not counted again over gRPC, and the other way round (a caller's
	// requestIds are its own, whichever protocol it uses).
	if r := s.acquire(t, refundsToken, slot(bizBoth, "ALIPAY", "b-1")); r.Status != 200 {
		t.Fatalf("HTTP b-1: %d", r.Status)
	}
	for _, id := range []string{"b-1", "b-2"} {
		g, err := rls.ShouldRateLimit(withToken(refundsToken), &rlsv3.RateLimitRequest{
			Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", bizBoth, "channel", "ALIPAY", "request_id", id)},
		})
		if err != nil || g.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("gRPC %s: %v %v, want OK", id, g.GetOverallCode(), err)
		}
	}
	if r := s.acquire(t, refundsToken, slot(bizBoth, "ALIPAY", "b-2")); r.Status != 200 || r.JSON(t)["duplicate"] != true || used(t, r, 0) != 2 {
		t.Fatalf("HTTP retry of a gRPC member: %d %s, want 200, duplicate, 2 used", r.Status, r.Body)
	}
	// Without request_id every hit is a new member. hits_addend 2 with one
	// slot left is OVER_LIMIT, and the slot the first hit took is given
	// back: the request does not go ahead.
	g, err := rls.ShouldRateLimit(withToken(payoutsToken), &rlsv3.RateLimitRequest{
		HitsAddend:  2,
		Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", bizBoth, "channel", "ALIPAY")},
	})
	if err != nil || g.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("2 hits with 1 slot left: %v %v, want OVER_LIMIT", g.GetOverallCode(), err)
	}
	if p := s.peek(t, refundsToken, "bizType="+bizBoth+"&channel=ALIPAY"); used(t, p, 0) != 2 {
		t.Errorf("after an OVER_LIMIT gRPC check the window holds %v, want 2 (nothing taken)", used(t, p, 0))
	}
	// is_negative_hits with request_id releases, like /v1/limits/release.
	neg := descriptor("bizType", bizGRPC, "channel", "ALIPAY", "request_id", "e-1")
	neg.IsNegativeHits = true
	if _, err := rls.ShouldRateLimit(withToken(refundsToken), &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{neg}}); err != nil {
		t.Fatalf("negative hits: %v", err)
	}
	if p := s.peek(t, refundsToken, "bizType="+bizGRPC+"&channel=ALIPAY"); used(t, p, 0) != 2 {
		t.Errorf("after releasing e-1 over gRPC the window holds %v, want 2", used(t, p, 0))
	}

	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"no descriptors", &rlsv3.RateLimitRequest{}},
		{"no channel", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A")}}},
		{"bad bizType", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "a-b", "channel", "ALIPAY")}}},
		{"bad request_id", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "channel", "B", "request_id", "a b")}}},
		{"unknown entry", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "channel", "B", "remote_address", "10.0.0.1")}}},
		{"repeated entry", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "bizType", "C", "channel", "B")}}},
		{"hits with request_id", &rlsv3.RateLimitRequest{HitsAddend: 3, Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "channel", "B", "request_id", "x")}}},
		{"too many hits", &rlsv3.RateLimitRequest{HitsAddend: 100000, Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "channel", "B")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rls.ShouldRateLimit(withToken(refundsToken), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("got %v, want INVALID_ARGUMENT", err)
			}
		})
	}
	_, err = rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{descriptor("bizType", "A", "channel", "B")}})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v, want UNAUTHENTICATED", err)
	}
}

// TestClientPackage: api/client against a running payserver: acquire,
// duplicate, peek, limited with RetryAfter, invalid with fields,
// unauthorized, release, waiting, and unavailable on a dead address.
func TestClientPackage(t *testing.T) {
	biz := testutil.UniqueName("CLIENT")
	s := startServer(t, serverOptions{Env: limitsEnv(nil), Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 1, window: 2s}\n", biz)})
	c, err := client.New(client.Options{BaseURL: s.base, Token: refundsToken, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := client.Key{BizType: biz, Channel: "ALIPAY"}
	a, err := c.Acquire(ctx, client.AcquireRequest{Key: key, RequestID: "c-1", Amount: 100, Currency: "CNY"})
	if err != nil || len(a.Windows) != 1 || a.Windows[0].Used != 1 || a.Windows[0].Size != 2*time.Second {
		t.Fatalf("Acquire: %+v, %v; want one 2s window with 1 used", a, err)
	}
	if a, err := c.Acquire(ctx, client.AcquireRequest{Key: key, RequestID: "c-1", Amount: 100, Currency: "CNY"}); err != nil || !a.Duplicate {
		t.Fatalf("Acquire again: %+v, %v; want a duplicate", a, err)
	}
	// A requestId's identity is its requestId and its amount.
	var conflict *client.ConflictError
	if _, err := c.Acquire(ctx, client.AcquireRequest{Key: key, RequestID: "c-1", Amount: 200, Currency: "CNY"}); !errors.As(err, &conflict) ||
		conflict.Body.Code != "IDEMPOTENCY_CONFLICT" || !strings.Contains(err.Error(), "409 IDEMPOTENCY_CONFLICT") {
		t.Fatalf("Acquire again with another amount: %v; want *ConflictError, 409 IDEMPOTENCY_CONFLICT", err)
	}
	if p, err := c.Peek(ctx, key); err != nil || p.Allowed || p.Windows[0].Remaining != 0 {
		t.Fatalf("Peek: %+v, %v; want a full window", p, err)
	}
	_, err = c.Acquire(ctx, client.AcquireRequest{Key: key, RequestID: "c-2"})
	var limited *client.LimitedError
	if !errors.As(err, &limited) || limited.RetryAfter <= 0 || limited.RetryAfter > 2*time.Second || limited.Limit != 1 {
		t.Fatalf("Acquire on a full window: %v, want *LimitedError with RetryAfter in (0, 2s]", err)
	}
	// Waiting: admitted once c-1 leaves its window.
	start := time.Now()
	if _, err := c.Acquire(ctx, client.AcquireRequest{Key: key, RequestID: "c-2", MaxWait: 5 * time.Second}); err != nil {
		t.Fatalf("Acquire with MaxWait: %v", err)
	} else if time.Since(start) < limited.RetryAfter-100*time.Millisecond {
		t.Errorf("admitted after %v, before the window freed (%v)", time.Since(start), limited.RetryAfter)
	}
	if err := c.Release(ctx, key, "c-2"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := c.Release(ctx, key, "c-2"); !errors.Is(err, client.ErrSlotNotFound) {
		t.Fatalf("Release again: %v, want ErrSlotNotFound", err)
	}
	_, err = c.Acquire(ctx, client.AcquireRequest{Key: client.Key{BizType: "bad", Channel: "ALIPAY"}, RequestID: "c-3"})
	var invalid *client.InvalidError
	if !errors.As(err, &invalid) || len(invalid.Fields) != 1 || invalid.Fields[0].Field != "bizType" {
		t.Fatalf("bad bizType: %v, want *InvalidError naming bizType", err)
	}
	other, _ := client.New(client.Options{BaseURL: s.base, Token: "not-a-client-token"})
	if _, err := other.Peek(ctx, key); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("wrong token: %v, want ErrUnauthorized", err)
	}
	dead, _ := client.New(client.Options{BaseURL: "http://" + freePort(t), Token: refundsToken, Timeout: 500 * time.Millisecond})
	var unavailable *client.UnavailableError
	if _, err := dead.Peek(ctx, key); !errors.As(err, &unavailable) || unavailable.Status != 0 {
		t.Fatalf("dead server: %v, want *UnavailableError", err)
	}
}

// TestGRPCHugeRequestsWithoutATokenTakeNoMemory: 16 concurrent requests
// of about 4 MB each (some 380,000 descriptors) without a token, on one
// connection, are refused UNAUTHENTICATED from their headers: payserver's
// resident memory stays within 50 MB of where it was.
func TestGRPCHugeRequestsWithoutATokenTakeNoMemory(t *testing.T) {
	grpcAddr := freePort(t)
	s := startServer(t, serverOptions{Embedded: true, Fast: true, Env: limitsEnv(map[string]string{"PAYSERVER_GRPC_ADDR": grpcAddr})})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	rls := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "payserver"}
	for n := 0; n < 4<<20-64<<10; n += 16 { // 16 bytes each; under gRPC's default 4 MB cap
		req.Descriptors = append(req.Descriptors, descriptor("bizType", "A"))
	}
	before := residentMB(t, s.cmd.Process.Pid)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = rls.ShouldRateLimit(context.Background(), req)
		}()
	}
	wg.Wait()
	after := residentMB(t, s.cmd.Process.Pid)
	for i, err := range errs {
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("call %d: got %v, want UNAUTHENTICATED", i, err)
		}
	}
	t.Logf("payserver resident memory: %d MB before, %d MB after 16 concurrent requests of %.1f MB without a token", before, after, float64(proto.Size(req))/(1<<20))
	if after-before > 50 {
		t.Fatalf("resident memory grew from %d MB to %d MB, want at most 50 MB more", before, after)
	}
}

// residentMB reads a process's resident set size (VmRSS) in MB.
func residentMB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb >> 10
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}
