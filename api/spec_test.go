package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/configcenter"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

func newValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := NewValidator()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

func TestSpecLoadsAndValidates(t *testing.T) {
	v := newValidator(t)
	if !bytes.HasPrefix(Spec(), []byte("openapi: 3.0.3\n")) {
		t.Fatalf("Spec() does not start with the OpenAPI 3.0.3 header")
	}
	for _, p := range []string{"/pay", "/pay/{requestId}", "/healthz", "/readyz", "/limits", "/limits/history", "/metrics",
		"/reports/channel-limits", "/reports/channel-amounts", "/channels/usage", "/dashboard", "/dashboard/login", "/dashboard/logout", "/dashboard/what-if",
		"/v1/limits/acquire", "/v1/limits/release", "/v1/limits/peek", "/reports/limit-callers", "/reports/routes", "/channels/{code}/notify", "/reports/admissions", "/reports/discrepancies", "/limits/learned/reset", "/limits/what-if", "/"} {
		if v.Doc().Paths.Value(p) == nil {
			t.Errorf("path %s is not documented", p)
		}
	}
	if got := len(v.Doc().Paths.Map()); got != 25 {
		t.Errorf("%d paths documented, want 25", got)
	}
	// Spec returns a copy: scribbling on it must not change the embedded one.
	s := Spec()
	s[0] = 'X'
	if Spec()[0] != 'o' {
		t.Fatal("Spec() exposes the embedded document")
	}
}

// The PayCurrency enum must be exactly the currencies POST /pay accepts.
func TestPayCurrencyEnumMatchesPay(t *testing.T) {
	v := newValidator(t)
	var got []string
	for _, e := range v.Doc().Components.Schemas["PayCurrency"].Value.Enum {
		got = append(got, e.(string))
	}
	slices.Sort(got)
	if want := pay.Currencies(); !slices.Equal(got, want) {
		t.Fatalf("PayCurrency enum = %v, want pay.Currencies() = %v", got, want)
	}
}

// The ErrorCode enum must be exactly apperr's codes.
func TestErrorCodesMatchApperr(t *testing.T) {
	v := newValidator(t)
	want := []string{
		string(apperr.RequestLimited), string(apperr.InvalidRequest), string(apperr.ChannelNotSupported),
		string(apperr.IdempotencyConflict), string(apperr.OrderNotFound), string(apperr.SlotNotFound), string(apperr.DependencyUnavailable),
		string(apperr.ChannelError), string(apperr.Unauthorized), string(apperr.Forbidden), string(apperr.AuthThrottled), string(apperr.NotFound),
		string(apperr.MethodNotAllowed), string(apperr.Internal),
		string(apperr.UnsupportedMediaType), string(apperr.URITooLong), string(apperr.HeadersTooLarge), string(apperr.BodyTooLarge),
		string(apperr.NotImplemented), string(apperr.HTTPVersionNotSupported),
	}
	var got []string
	for _, e := range v.Doc().Components.Schemas["ErrorCode"].Value.Enum {
		got = append(got, e.(string))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ErrorCode enum = %v, want %v", got, want)
	}
}

// The request bounds in the spec must be the ones internal/pay enforces.
func TestBoundsMatchPay(t *testing.T) {
	s := newValidator(t).Doc().Components.Schemas
	check := func(name string, got *uint64, want int) {
		t.Helper()
		if got == nil || *got != uint64(want) {
			t.Errorf("%s maxLength = %v, want %d", name, got, want)
		}
	}
	check("RequestId", s["RequestId"].Value.MaxLength, pay.MaxRequestIDLen)
	check("MerchantId", s["MerchantId"].Value.MaxLength, pay.MaxMerchantIDLen)
	check("Subject", s["Subject"].Value.MaxLength, pay.MaxSubjectLen)
	check("PayRequest.subject", s["PayRequest"].Value.Properties["subject"].Value.MaxLength, pay.MaxSubjectLen)
	check("Code", s["Code"].Value.MaxLength, ratelimit.MaxCodeLen)
	if m := s["Amount"].Value.Max; m == nil || *m != float64(pay.MaxAmount) {
		t.Errorf("Amount maximum = %v, want %d", m, int64(pay.MaxAmount))
	}
}

func jsonHeader() http.Header {
	return http.Header{"Content-Type": []string{"application/json; charset=utf-8"}}
}

const validOrder = `{
  "orderNo": "PS20261121232800a1b2c3d4e5f6",
  "requestId": "ORD-1",
  "bizType": "ONLINE_PAY",
  "channel": "ALIPAY",
  "merchantId": "M1",
  "amount": 1999,
  "currency": "CNY",
  "subject": "Order 1",
  "status": "SUCCEEDED",
  "channelTradeNo": "T-1",
  "createdAt": "2026-11-21T23:28:00.123456789Z",
  "updatedAt": "2026-11-21T23:28:00.5Z"
}`

const validLimited = `{
  "code": "REQUEST_LIMITED",
  "message": "channel ALIPAY is at its limit for ONLINE_PAY",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": 100, "used": 100, "windowMs": 1000, "retryAfterMs": 420}
}`

const validClosed = `{
  "code": "REQUEST_LIMITED",
  "message": "channel ALIPAY is closed for ONLINE_PAY",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": 0, "used": 0, "windowMs": 1000, "closed": true}
}`

const validAmountDay = `{
  "code": "REQUEST_LIMITED",
  "message": "channel UNIONPAY is at its channel-wide limit (amount/day) for ONLINE_PAY",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "UNIONPAY", "rule": "amount/day", "amount": 500000000, "used": 499990000, "scope": "*:UNIONPAY", "retryAfterMs": 8400000}
}`

const validExceedsCap = `{
  "code": "REQUEST_LIMITED",
  "message": "amount 5.00 CNY is above the amount/1m cap 1.00 CNY of channel ALIPAY for ONLINE_PAY",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "amount/1m", "amount": 100, "used": 0, "windowMs": 60000, "exceedsCap": true,
    "currency": "CNY", "requestAmount": 500, "remaining": 100, "amountMajor": "1.00", "usedMajor": "0.00", "remainingMajor": "1.00", "requestAmountMajor": "5.00"}
}`

const validThrottled = `{
  "code": "REQUEST_LIMITED",
  "message": "channel ALIPAY throttled the payment: nothing was charged; retry with a new requestId",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "ALIPAY", "reason": "channelThrottled", "orderNo": "PS1", "retryAfterMs": 1000}
}`

const validThrottledReplay = `{
  "code": "REQUEST_LIMITED",
  "message": "channel ALIPAY throttled the payment: nothing was charged; retry with a new requestId",
  "requestId": "ORD-1",
  "details": {"bizType": "ONLINE_PAY", "channel": "ALIPAY", "reason": "channelThrottled", "orderNo": "PS1"}
}`

func TestCheckResponseHandBuilt(t *testing.T) {
	v := newValidator(t)
	post := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:39127/pay", nil)
	get := httptest.NewRequest(http.MethodGet, "http://10.1.2.3:8080/pay/ORD-1", nil)
	limitedHeader := jsonHeader()
	limitedHeader.Set("Retry-After", "1")

	accept := []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
	}{
		{"200 order", post, 200, jsonHeader(), validOrder},
		{"200 order on GET, any host", get, 200, jsonHeader(), validOrder},
		{"429 with Retry-After", post, 429, limitedHeader, validLimited},
		{"429 closed without Retry-After", post, 429, jsonHeader(), validClosed},
		{"429 calendar amount on a channel-wide key", post, 429, limitedHeader, validAmountDay},
		{"429 amount above its cap without Retry-After", post, 429, jsonHeader(), validExceedsCap},
		{"429 channel throttled with Retry-After", post, 429, limitedHeader, validThrottled},
		{"429 channel throttled replayed without Retry-After", post, 429, jsonHeader(), validThrottledReplay},
		{"400 CHANNEL_NOT_SUPPORTED", post, 400, jsonHeader(),
			`{"code":"CHANNEL_NOT_SUPPORTED","message":"x","requestId":"","details":{"channel":"PAYPAL"}}`},
		{"unknown path answered NOT_FOUND", httptest.NewRequest("GET", "/nope", nil), 404, jsonHeader(),
			`{"code":"NOT_FOUND","message":"no route GET /nope","requestId":"","details":{}}`},
		{"wrong method answered METHOD_NOT_ALLOWED", httptest.NewRequest("DELETE", "/pay", nil), 405, jsonHeader(),
			`{"code":"METHOD_NOT_ALLOWED","message":"x","requestId":"","details":{}}`},
	}
	for _, c := range accept {
		if err := v.CheckResponse(c.req, c.status, c.header, []byte(c.body)); err != nil {
			t.Errorf("%s: rejected: %v", c.name, err)
		}
	}

	// why is a fragment of the expected error, so each case fails for the
	// reason it is about.
	reject := []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		why    string
	}{
		{"error body missing code", post, 429, limitedHeader,
			`{"message":"m","requestId":"","details":{"bizType":"A","channel":"B","limit":1,"windowMs":1000,"retryAfterMs":1}}`, "property \"code\" is missing"},
		{"status not documented", post, 418, jsonHeader(),
			`{"code":"INTERNAL","message":"teapot","requestId":"","details":{}}`, "status is not supported"},
		{"order status BOGUS", post, 200, jsonHeader(), strings.Replace(validOrder, `"SUCCEEDED"`, `"BOGUS"`, 1), "value is not one of the allowed values"},
		{"429 without Retry-After", post, 429, jsonHeader(), validLimited, "header \"Retry-After\" missing"},
		{"429 closed with Retry-After", post, 429, limitedHeader, validClosed, "closed key"},
		{"429 above its cap with Retry-After", post, 429, limitedHeader, validExceedsCap, "above its cap"},
		{"429 channel throttled without Retry-After", post, 429, jsonHeader(), validThrottled, "header \"Retry-After\" missing"},
		{"429 channel throttled replayed with Retry-After", post, 429, limitedHeader, validThrottledReplay, "replay"},
		{"429 with a bad rule name", post, 429, limitedHeader, strings.Replace(validAmountDay, "amount/day", "amount/week", -1), "/details/rule"},
		{"429 with non-integer Retry-After", post, 429, http.Header{
			"Content-Type": {"application/json"}, "Retry-After": {"soon"}}, validLimited, "Retry-After"},
		{"code outside the enum", post, 500, jsonHeader(),
			`{"code":"OOPS","message":"m","requestId":"","details":{}}`, "/code"},
		{"code not for this status", post, 429, limitedHeader,
			strings.Replace(validLimited, "REQUEST_LIMITED", "INTERNAL", 1), "/code"},
		{"order missing createdAt", post, 200, jsonHeader(),
			strings.Replace(validOrder, `"createdAt": "2026-11-21T23:28:00.123456789Z",`, "", 1), "createdAt"},
		{"order with an undocumented field", post, 200, jsonHeader(),
			strings.Replace(validOrder, `"amount": 1999,`, `"amount": 1999, "fee": 1,`, 1), "fee"},
		{"amount as a string", post, 200, jsonHeader(),
			strings.Replace(validOrder, `"amount": 1999`, `"amount": "1999"`, 1), "/amount"},
		{"bad date-time", post, 200, jsonHeader(),
			strings.Replace(validOrder, `"2026-11-21T23:28:00.5Z"`, `"yesterday"`, 1), "date-time"},
		{"wrong content type", post, 200, http.Header{"Content-Type": {"text/html"}}, validOrder, "text/html"},
		{"not JSON", post, 200, jsonHeader(), `<html>`, "failed to decode response body"},
		{"unknown path answered 200", httptest.NewRequest("GET", "/nowhere", nil), 200, jsonHeader(), `{}`, "only 404 NOT_FOUND"},
		{"wrong method answered 404", httptest.NewRequest("DELETE", "/pay", nil), 404, jsonHeader(),
			`{"code":"NOT_FOUND","message":"x","requestId":"","details":{}}`, "only 405 METHOD_NOT_ALLOWED"},
		{"INVALID_REQUEST without fields", get, 400, jsonHeader(),
			`{"code":"INVALID_REQUEST","message":"x","requestId":"","details":{}}`, "property \"fields\" is missing"},
	}
	for _, c := range reject {
		err := v.CheckResponse(c.req, c.status, c.header, []byte(c.body))
		switch {
		case err == nil:
			t.Errorf("%s: accepted, want an error", c.name)
		case !strings.Contains(err.Error(), c.why):
			t.Errorf("%s: error does not mention %q: %v", c.name, c.why, err)
		}
	}
}

// --- The spec against the real HTTP layer and pay flow. ---

// storeFault makes a requestId starting "dbdown-" fail as if the database
// were down, and one starting "panic-" panic.
func storeFault(id string) error {
	if strings.HasPrefix(id, "panic-") {
		panic("memStore: " + id)
	}
	if strings.HasPrefix(id, "dbdown-") {
		return errors.New("memStore: connection refused")
	}
	return nil
}

// specRoutes is a fixed route table.
type specRoutes map[string][]string

func (r specRoutes) Route(biz string) ([]string, error) { return r[biz], nil }

// fakeLimiter refuses bizType LIMITED and CLOSED, and is down for bizType
// REDIS_DOWN.
type fakeLimiter struct{}

func (fakeLimiter) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	k := r.Key
	switch k.BizType {
	case "LIMITED":
		return ratelimit.Decision{Key: k, Limit: 2, Window: time.Second, Count: 2, RetryAfter: 1500 * time.Millisecond}, nil
	case "CLOSED":
		return ratelimit.Decision{Key: k, Limit: 0, Window: time.Minute, RetryAfter: time.Minute, Source: ratelimit.SourceClosed}, nil
	case "REDIS_DOWN":
		return ratelimit.Decision{Key: k}, ratelimit.ErrUnavailable
	}
	return ratelimit.Decision{Key: k, Allowed: true, Limit: 100, Window: time.Second}, nil
}

func (fakeLimiter) Release(context.Context, ratelimit.Hold) error { return nil }

func (fakeLimiter) ReleaseAmount(context.Context, ratelimit.Hold) error            { return nil }
func (fakeLimiter) Throttled(context.Context, ratelimit.Hold, time.Duration) error { return nil }

type fakeLimits struct{ loaded atomic.Bool }

func (f *fakeLimits) Config() *ratelimit.Config {
	if !f.loaded.Load() {
		return nil
	}
	parsed, err := limits.Parse([]byte(`
window: 1s
limits:
  ONLINE_PAY:ALIPAY: 100
  ONLINE_PAY:WECHAT: -1
  REFUND:ALIPAY:
    - {limit: 20, window: 1s}
    - {limit: 600, window: 1m}
  REFUND:WECHAT: {limit: 0, window: 500ms, shadow: true}
  PAYOUT:ALIPAY:
    - {amount: 500000000, calendar: day, zone: Asia/Shanghai, currency: CNY}
    - {limit: 300000, calendar: day, cutoff: "23:00", zone: Asia/Shanghai}
    - {amount: 100000, window: 60s}
  "*:UNIONPAY":
    - {limit: 200, window: 1s, reserve: {REFUND: 40}}
schedules:
  - {key: "*:UNIONPAY", from: "2000-12-01T02:00:00+08:00", to: "2000-12-01T04:00:00+08:00", limits: 0}
  - {key: "*:UNIONPAY", from: "2000-12-02T00:00:00Z", to: "2999-01-01T00:00:00Z", limits: [{limit: 300, window: 1s}]}
  - {key: "ONLINE_PAY:UNIONPAY", from: "2998-11-11T00:00:00+08:00", to: "2998-11-12T00:00:00+08:00", limits: [{limit: 300, window: 1s}]}
`))
	if err != nil {
		panic(err)
	}
	return parsed.Config
}

// Usage answers like the limiter: a count per window of the rule in force,
// and an error for REFUND:ALIPAY (as if Redis were down for it).
func (f *fakeLimits) Usage(_ context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	r := f.Config().RuleAt(k, time.Now())
	if k.String() == "REFUND:ALIPAY" {
		return r, nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	if r.IsUnlimited() {
		return r, nil, nil
	}
	counts := make([]int64, len(r.Windows))
	for i, w := range r.Windows {
		counts[i] = w.Limit / 2
	}
	return r, counts, nil
}

func (f *fakeLimits) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, k := range keys {
		out[i].Rule, out[i].Counts, out[i].Err = f.Usage(ctx, k)
	}
	return out
}

func (f *fakeLimits) Status() configcenter.Status {
	if !f.loaded.Load() {
		return configcenter.Status{Source: "file", Name: "limits.yaml", Describe: "file limits.yaml",
			Refusals: 1, LastRefusal: "limits document is empty", LastRefusalAt: time.Now()}
	}
	return configcenter.Status{Loaded: true, Source: "file", Name: "limits.yaml", Describe: "file limits.yaml",
		MD5: "0123456789abcdef0123456789abcdef", LoadedAt: time.Now(), Applied: 1}
}

func (f *fakeLimits) Degraded() bool { return false }

func (f *fakeLimits) Routes() limits.Routes { return nil }

type exchange struct {
	name, method, path, body string
	header                   map[string]string
	wantStatus               int
	wantCode                 string // error code, when an error is expected
}

func TestSpecMatchesServer(t *testing.T) {
	gin.SetMode(gin.TestMode)
	v := newValidator(t)

	sims := []struct {
		code string
		cfg  channel.SimulatorConfig
	}{
		{"ALIPAY", channel.SimulatorConfig{}},
		{"DECLINER", channel.SimulatorConfig{DeclineRate: 1}},
		{"BUSY", channel.SimulatorConfig{ErrorRate: 1}},
		{"HANGS", channel.SimulatorConfig{TimeoutRate: 1}},
	}
	var chs []channel.Channel
	for _, s := range sims {
		sim, err := channel.NewSimulator(s.code, s.cfg)
		if err != nil {
			t.Fatal(err)
		}
		chs = append(chs, sim)
	}
	reg, err := channel.NewRegistry(chs...)
	if err != nil {
		t.Fatal(err)
	}
	store := paytest.NewMemStore()
	store.GetFault = storeFault
	svc, err := pay.NewService(store, fakeLimiter{}, reg, pay.Options{ChannelTimeout: 50 * time.Millisecond, InFlightWait: 10 * time.Millisecond,
		Routes: specRoutes{"ONLINE_PAY": {"ALIPAY"}, "LIMITED": {"ALIPAY", "DECLINER"}, "CLOSED": {"ALIPAY"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A PROCESSING order, as left by a request still in flight.
	now := time.Now().UTC()
	_ = store.Create(context.Background(), &pay.Order{OrderNo: "PS20261121232800a1b2c3d4e5f6", RequestID: "inflight-1",
		RequestHash: pay.PayRequest{BizType: "ONLINE_PAY", Channel: "ALIPAY", MerchantID: "M1", Amount: 1, Currency: "CNY"}.Hash(),
		BizType:     "ONLINE_PAY", Channel: "ALIPAY", MerchantID: "M1", Amount: 1, Currency: "CNY",
		Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now})

	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "payserver_test_total", Help: "test"}))
	var redisUp atomic.Bool
	redisUp.Store(true)
	limits := &fakeLimits{}
	h, err := httpapi.New(httpapi.Options{
		Pay:        svc,
		Logger:     slog.New(slog.DiscardHandler),
		AdminToken: "s3cret",
		Metrics:    promhttp.HandlerFor(reg2, promhttp.HandlerOpts{}),
		Limits:     limits,
		Ready: []httpapi.Check{
			{Name: "database", Check: httpapi.Required(func(context.Context) error { return nil })},
			{Name: "redis", Check: httpapi.Required(func(context.Context) error {
				if redisUp.Load() {
					return nil
				}
				return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
			})},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	payBody := func(id, biz, ch string, amount string) string {
		return `{"requestId":"` + id + `","bizType":"` + biz + `","channel":"` + ch +
			`","merchantId":"M1","amount":` + amount + `,"currency":"CNY","subject":"Order 1"}`
	}
	admin := map[string]string{"Authorization": "Bearer s3cret"}
	run := func(t *testing.T, ex exchange) {
		t.Helper()
		req, err := http.NewRequest(ex.method, srv.URL+ex.path, strings.NewReader(ex.body))
		if err != nil {
			t.Fatal(err)
		}
		if ex.method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, val := range ex.header {
			req.Header.Set(k, val)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != ex.wantStatus {
			t.Fatalf("%s %s: status %d, want %d; body %s", ex.method, ex.path, resp.StatusCode, ex.wantStatus, body)
		}
		if ex.wantCode != "" && !bytes.Contains(body, []byte(`"code":"`+ex.wantCode+`"`)) {
			t.Fatalf("%s %s: body %s lacks code %s", ex.method, ex.path, body, ex.wantCode)
		}
		if err := v.CheckResponse(req, resp.StatusCode, resp.Header, body); err != nil {
			t.Fatalf("%s\nbody: %s", err, body)
		}
	}

	exchanges := []exchange{
		{name: "pay succeeds", method: "POST", path: "/pay", body: payBody("ok-1", "ONLINE_PAY", "ALIPAY", "1999"), wantStatus: 200},
		{name: "replay", method: "POST", path: "/pay", body: payBody("ok-1", "ONLINE_PAY", "ALIPAY", "1999"), wantStatus: 200},
		{name: "replay with another payload", method: "POST", path: "/pay", body: payBody("ok-1", "ONLINE_PAY", "ALIPAY", "2000"),
			wantStatus: 409, wantCode: "IDEMPOTENCY_CONFLICT"},
		{name: "replay of an in-flight request", method: "POST", path: "/pay",
			body:       `{"requestId":"inflight-1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 409, wantCode: "IDEMPOTENCY_CONFLICT"},
		{name: "no subject", method: "POST", path: "/pay",
			body:       `{"requestId":"nosub-1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M1","amount":1,"currency":"CNY","subject":null}`,
			wantStatus: 200},
		{name: "declined", method: "POST", path: "/pay", body: payBody("dec-1", "ONLINE_PAY", "DECLINER", "5"), wantStatus: 200},
		{name: "channel timeout is UNKNOWN", method: "POST", path: "/pay", body: payBody("hang-1", "ONLINE_PAY", "HANGS", "5"), wantStatus: 200},
		{name: "channel system error", method: "POST", path: "/pay", body: payBody("busy-1", "ONLINE_PAY", "BUSY", "5"),
			wantStatus: 502, wantCode: "CHANNEL_ERROR"},
		{name: "limited", method: "POST", path: "/pay", body: payBody("lim-1", "LIMITED", "ALIPAY", "5"),
			wantStatus: 429, wantCode: "REQUEST_LIMITED"},
		{name: "routed", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-1","bizType":"ONLINE_PAY","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 200},
		{name: "routed, empty channel", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-2","bizType":"ONLINE_PAY","channel":"","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 200},
		{name: "routed replay", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-2","bizType":"ONLINE_PAY","channel":null,"merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 200},
		{name: "routed, every candidate limited", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-3","bizType":"LIMITED","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 429, wantCode: "REQUEST_LIMITED"},
		{name: "routed, every candidate closed", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-4","bizType":"CLOSED","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 429, wantCode: "REQUEST_LIMITED"},
		{name: "no channel and no route", method: "POST", path: "/pay",
			body:       `{"requestId":"routed-5","bizType":"NOROUTE","merchantId":"M1","amount":1,"currency":"CNY"}`,
			wantStatus: 400, wantCode: "INVALID_REQUEST"},
		{name: "closed key", method: "POST", path: "/pay", body: payBody("lim-2", "CLOSED", "ALIPAY", "5"),
			wantStatus: 429, wantCode: "REQUEST_LIMITED"},
		{name: "limiter down", method: "POST", path: "/pay", body: payBody("rd-1", "REDIS_DOWN", "ALIPAY", "5"),
			wantStatus: 503, wantCode: "DEPENDENCY_UNAVAILABLE"},
		{name: "database down", method: "POST", path: "/pay", body: payBody("dbdown-1", "ONLINE_PAY", "ALIPAY", "5"),
			wantStatus: 503, wantCode: "DEPENDENCY_UNAVAILABLE"},
		{name: "panic", method: "POST", path: "/pay", body: payBody("panic-1", "ONLINE_PAY", "ALIPAY", "5"),
			wantStatus: 500, wantCode: "INTERNAL"},
		{name: "unsupported channel", method: "POST", path: "/pay", body: payBody("ch-1", "ONLINE_PAY", "PAYPAL", "5"),
			wantStatus: 400, wantCode: "CHANNEL_NOT_SUPPORTED"},
		{name: "many bad fields", method: "POST", path: "/pay",
			body:       `{"requestId":"bad id","bizType":"x","amount":1.5,"currency":"cny","extra":1}`,
			wantStatus: 400, wantCode: "INVALID_REQUEST"},
		{name: "malformed JSON", method: "POST", path: "/pay", body: `{`, wantStatus: 400, wantCode: "INVALID_REQUEST"},
		{name: "text/plain body", method: "POST", path: "/pay", body: payBody("ct-1", "ONLINE_PAY", "ALIPAY", "5"),
			header: map[string]string{"Content-Type": "text/plain"}, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "6,000 unknown fields", method: "POST", path: "/pay", body: `{"u":1` + strings.Repeat(`,"u":1`, 6000) + `}`,
			wantStatus: 400, wantCode: "INVALID_REQUEST"},
		{name: "body too large", method: "POST", path: "/pay", body: strings.Repeat(" ", httpapi.MaxBodyBytes+1),
			wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "get order", method: "GET", path: "/pay/ok-1", wantStatus: 200},
		{name: "get declined", method: "GET", path: "/pay/dec-1", wantStatus: 200},
		{name: "get CHANNEL_ERROR order", method: "GET", path: "/pay/busy-1", wantStatus: 200},
		{name: "get PROCESSING order", method: "GET", path: "/pay/inflight-1", wantStatus: 200},
		{name: "get unknown order", method: "GET", path: "/pay/nobody", wantStatus: 404, wantCode: "ORDER_NOT_FOUND"},
		{name: "get malformed id", method: "GET", path: "/pay/bad%20id", wantStatus: 400, wantCode: "INVALID_REQUEST"},
		{name: "get with database down", method: "GET", path: "/pay/dbdown-2", wantStatus: 503, wantCode: "DEPENDENCY_UNAVAILABLE"},
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200},
		{name: "healthz with a huge body", method: "GET", path: "/healthz", body: strings.Repeat("x", httpapi.MaxBodyBytes+1),
			wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200},
		{name: "limits, none loaded", method: "GET", path: "/limits", header: admin, wantStatus: 200},
		{name: "limits without token", method: "GET", path: "/limits", wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "metrics", method: "GET", path: "/metrics", header: admin, wantStatus: 200},
		{name: "metrics with a wrong token", method: "GET", path: "/metrics", header: map[string]string{"Authorization": "Bearer nope"},
			wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "no such route", method: "GET", path: "/nope", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "wrong method", method: "DELETE", path: "/pay", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
	}
	for _, ex := range exchanges {
		t.Run(ex.name, func(t *testing.T) { run(t, ex) })
	}

	limits.loaded.Store(true)
	redisUp.Store(false)
	t.Run("limits, loaded", func(t *testing.T) {
		run(t, exchange{method: "GET", path: "/limits", header: admin, wantStatus: 200})
	})
	t.Run("readyz, redis down", func(t *testing.T) {
		run(t, exchange{method: "GET", path: "/readyz", wantStatus: 503})
	})
}
