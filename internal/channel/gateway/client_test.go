package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/testutil"
)

// class is what a call's error says can have happened, as payserver's pay
// flow reads it (ErrNotSent first).
type class string

const (
	answered  class = "answered"  // no error
	notSent   class = "not sent"  // ErrNotSent, not a ThrottledError
	throttled class = "throttled" // *channel.ThrottledError (Is ErrNotSent)
	notFound  class = "not found" // ErrNotFound
	timedOut  class = "timeout"   // ErrTimeout and not ErrNotSent: unknown
	unknown   class = "unknown"   // any other error: unknown
)

func classOf(err error) class {
	var te *channel.ThrottledError
	switch {
	case err == nil:
		return answered
	case errors.As(err, &te):
		return throttled
	case errors.Is(err, channel.ErrNotSent):
		return notSent
	case errors.Is(err, channel.ErrNotFound):
		return notFound
	case errors.Is(err, channel.ErrTimeout):
		return timedOut
	}
	return unknown
}

// testOrder is the payment the tests send.
var testOrder = channel.Request{
	OrderNo: "PS20260101000000a1b2c3d4e5f6", RequestID: "req-1", BizType: "ECOM",
	MerchantID: "M100", Amount: 1999, Currency: "CNY", Subject: "green tea",
}

func testConfig(baseURL string) Config {
	return Config{Code: testCode, BaseURL: baseURL, Keys: keysOf(testSecret), CallTimeout: 2 * time.Second,
		ThrottleCodes: []string{"FREQUENCY_LIMITED"}}
}

// mustChannel returns cfg's Channel; its idle connections close at the
// test's end.
func mustChannel(tb testing.TB, cfg Config, logger *slog.Logger) *Channel {
	tb.Helper()
	ch, err := NewChannel(cfg, logger, nil)
	if err != nil {
		tb.Fatalf("NewChannel: %v", err)
	}
	tb.Cleanup(ch.CloseIdle)
	return ch
}

// callCase is one call against a test gateway and what it must come to.
type callCase[R comparable] struct {
	name    string
	act     behaviour
	secret  []byte        // the client's secret, when not testSecret
	timeout time.Duration // the client's CallTimeout, when not 2s
	want    class
	res     R             // with answered
	retry   time.Duration // with throttled
	is      error         // the error also Is this
}

// runCalls runs each case against its own test gateway with call, and
// checks the class of its error, its result, what the gateway got, and
// the logs: one Warn naming the order for an unknown outcome, one Error
// about the secret for a 401, nothing above Info otherwise, and never a
// secret or a signature.
func runCalls[R comparable](t *testing.T, path string, call func(*Channel, context.Context, channel.Request) (R, error), cases []callCase[R]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t, tc.act)
			cfg := testConfig(g.srv.URL)
			if tc.secret != nil {
				cfg.Keys = keysOf(tc.secret)
			}
			if tc.timeout != 0 {
				cfg.CallTimeout = tc.timeout
			}
			logger, logs := testLogger()
			ch := mustChannel(t, cfg, logger)

			res, err := call(ch, context.Background(), testOrder)
			if got := classOf(err); got != tc.want {
				t.Fatalf("class %s (err %v), want %s", got, err, tc.want)
			}
			if tc.want == answered && res != tc.res {
				t.Errorf("result %+v, want %+v", res, tc.res)
			}
			if tc.want != answered && res != *new(R) {
				t.Errorf("result %+v with an error, want the zero value", res)
			}
			var te *channel.ThrottledError
			if errors.As(err, &te) && (te.Channel != testCode || te.RetryAfter != tc.retry) {
				t.Errorf("ThrottledError %+v, want channel %s, retry after %v", te, testCode, tc.retry)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err %v, want it to be %v", err, tc.is)
			}
			checkGot(t, g, path, tc.secret == nil)
			checkLogs(t, logs, tc.want, err, path)
			assertNoSecrets(t, logs.String(), g, tc.secret)
		})
	}
}

// checkGot checks that the gateway got the one request of testOrder on
// path, verified when signed.
func checkGot(t *testing.T, g *testGateway, path string, signed bool) {
	t.Helper()
	got := g.requests()
	if len(got) != 1 {
		t.Fatalf("the gateway got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.Path != path || r.Signed != signed {
		t.Fatalf("the gateway got %s (signed %v), want %s (signed %v)", r.Path, r.Signed, path, signed)
	}
	if !signed {
		return
	}
	if path == PathPay {
		want := PayRequest{
			OrderNo: testOrder.OrderNo, RequestID: testOrder.RequestID, MerchantID: testOrder.MerchantID,
			Amount: testOrder.Amount, Currency: testOrder.Currency, Subject: testOrder.Subject,
		}
		if r.Pay != want {
			t.Errorf("the gateway got %+v, want %+v", r.Pay, want)
		}
	} else if want := (OrderRequest{OrderNo: testOrder.OrderNo, RequestID: testOrder.RequestID, Amount: testOrder.Amount, Currency: testOrder.Currency}); r.Order != want {
		t.Errorf("the gateway got %+v, want %+v", r.Order, want)
	}
}

// checkLogs checks the Warn and Error records of one call of class c.
func checkLogs(t *testing.T, logs *testutil.LogBuffer, c class, err error, path string) {
	t.Helper()
	recs := records(t, logs)
	warns, errs := atLevel(recs, slog.LevelWarn), atLevel(recs, slog.LevelError)
	op := strings.TrimPrefix(path, "/")
	switch c {
	case unknown, timedOut:
		if len(warns) != 1 || len(errs) != 0 {
			t.Fatalf("%d Warn and %d Error records, want 1 and 0: %s", len(warns), len(errs), logs)
		}
		w := warns[0]
		if w["channel"] != testCode || w["orderNo"] != testOrder.OrderNo || w["op"] != op || w["reason"] == "" || w["reason"] == nil {
			t.Errorf("Warn record %v, want channel, op, orderNo and reason", w)
		}
	case notSent: // here: the 401
		if len(errs) != 1 || len(warns) != 0 {
			t.Fatalf("%d Error and %d Warn records, want 1 and 0: %s", len(errs), len(warns), logs)
		}
		if e := errs[0]; !strings.Contains(e["msg"].(string), "keys") || e["channel"] != testCode || e["orderNo"] != testOrder.OrderNo {
			t.Errorf("Error record %v, want one naming the channel and order and saying to check the keys", e)
		}
		if !strings.Contains(err.Error(), "401") {
			t.Errorf("err %v, want it to say 401", err)
		}
	default:
		if len(warns)+len(errs) != 0 {
			t.Errorf("Warn or Error records for a call that was answered: %s", logs)
		}
	}
}

func pay(ch *Channel, ctx context.Context, r channel.Request) (channel.Result, error) {
	return ch.Pay(ctx, r)
}

func query(ch *Channel, ctx context.Context, r channel.Request) (channel.Result, error) {
	return ch.Query(ctx, r)
}

func closeOrder(ch *Channel, ctx context.Context, r channel.Request) (channel.CloseResult, error) {
	return ch.Close(ctx, r)
}

// TestPay: every answer and failure of a pay, once the connection exists,
// is classified by what can have happened.
func TestPay(t *testing.T) {
	long := fmt.Sprintf(`{"orderNo":%q,"outcome":"SUCCEEDED","reason":"%s"}`, testOrder.OrderNo, strings.Repeat("x", MaxAnswerBytes))
	runCalls(t, PathPay, pay, []callCase[channel.Result]{
		{name: "succeeded", act: answer(Answer{Outcome: Succeeded, TradeNo: "T100"}),
			want: answered, res: channel.Result{Status: channel.Succeeded, TradeNo: "T100"}},
		{name: "declined", act: answer(Answer{Outcome: Declined, Code: "NO_FUNDS", Reason: "insufficient funds"}),
			want: answered, res: channel.Result{Status: channel.Declined, DeclineCode: "NO_FUNDS", DeclineReason: "insufficient funds"}},
		{name: "processing", act: answer(Answer{Outcome: Processing}),
			want: answered, res: channel.Result{Status: channel.Processing}},
		{name: "throttled with a wait", act: answer(Answer{Outcome: Throttled, RetryAfterMs: 1500}),
			want: throttled, retry: 1500 * time.Millisecond, is: channel.ErrNotSent},
		{name: "throttled without a wait", act: answer(Answer{Outcome: Throttled}),
			want: throttled, is: channel.ErrNotSent},
		{name: "declined with a throttle code", act: answer(Answer{Outcome: Declined, Code: "FREQUENCY_LIMITED"}),
			want: throttled, is: channel.ErrNotSent},
		{name: "throttled with an absurd wait", act: answer(Answer{Outcome: Throttled, RetryAfterMs: 1 << 62}),
			want: throttled, retry: time.Hour},
		{name: "401: our signature refused", act: answer(Answer{Outcome: Succeeded}), secret: []byte("another-secret-77-0123456789abcdefghij"),
			want: notSent},

		{name: "500", act: status(http.StatusInternalServerError), want: unknown, is: ErrBadAnswer},
		{name: "503", act: status(http.StatusServiceUnavailable), want: unknown, is: ErrBadAnswer},
		{name: "400", act: status(http.StatusBadRequest), want: unknown, is: ErrBadAnswer},
		{name: "redirect", act: status(http.StatusTemporaryRedirect), want: unknown, is: ErrBadAnswer},
		{name: "answer signed with another secret", act: answerSigned(Answer{Outcome: Succeeded}, []byte("not-the-secret"), 0),
			want: unknown, is: ErrBadSignature},
		{name: "stale answer", act: answerSigned(Answer{Outcome: Succeeded}, nil, -MaxSkew-time.Minute),
			want: unknown, is: ErrBadSignature},
		{name: "answer from the future", act: answerSigned(Answer{Outcome: Succeeded}, nil, MaxSkew+time.Minute),
			want: unknown, is: ErrBadSignature},
		{name: "unsigned answer", act: unsigned(Answer{Outcome: Succeeded}), want: unknown, is: ErrBadSignature},
		// THROTTLED is ErrNotSent only when the gateway provably said it.
		{name: "unsigned THROTTLED", act: unsigned(Answer{Outcome: Throttled}), want: unknown, is: ErrBadSignature},
		{name: "another order's answer", act: answer(Answer{OrderNo: "PS-ANOTHER", Outcome: Succeeded}),
			want: unknown, is: ErrBadAnswer},
		{name: "not JSON", act: rawAnswer([]byte("<html>ok</html>")), want: unknown, is: ErrBadAnswer},
		{name: "too long", act: rawAnswer([]byte(long)), want: unknown, is: ErrBadAnswer},
		{name: "NOT_FOUND to a pay", act: answer(Answer{Outcome: NotFound}), want: unknown, is: ErrBadAnswer},
		{name: "CLOSED to a pay", act: answer(Answer{Outcome: Closed}), want: unknown, is: ErrBadAnswer},
		{name: "an outcome of no protocol", act: answer(Answer{Outcome: "MAYBE"}), want: unknown, is: ErrBadAnswer},

		{name: "server hangs", act: hang(), timeout: 200 * time.Millisecond, want: timedOut, is: context.DeadlineExceeded},
		{name: "server hangs mid-answer", act: hangMidAnswer(), timeout: 200 * time.Millisecond, want: timedOut},
		{name: "server closes after reading", act: hangUp(), want: unknown},
		{name: "server closes mid-answer", act: hangUpMidAnswer(), want: unknown},
	})
}

// TestQuery: a query's outcomes; NOT_FOUND is ErrNotFound, never
// ErrNotSent.
func TestQuery(t *testing.T) {
	runCalls(t, PathQuery, query, []callCase[channel.Result]{
		{name: "succeeded", act: answer(Answer{Outcome: Succeeded, TradeNo: "T7"}),
			want: answered, res: channel.Result{Status: channel.Succeeded, TradeNo: "T7"}},
		{name: "declined", act: answer(Answer{Outcome: Declined, Code: "RISK", Reason: "refused by risk control"}),
			want: answered, res: channel.Result{Status: channel.Declined, DeclineCode: "RISK", DeclineReason: "refused by risk control"}},
		{name: "processing", act: answer(Answer{Outcome: Processing}),
			want: answered, res: channel.Result{Status: channel.Processing}},
		{name: "not found", act: answer(Answer{Outcome: NotFound}), want: notFound},
		{name: "throttled", act: answer(Answer{Outcome: Throttled, RetryAfterMs: 20}), want: throttled, retry: 20 * time.Millisecond},
		{name: "CLOSED to a query", act: answer(Answer{Outcome: Closed}), want: unknown, is: ErrBadAnswer},
		{name: "401", act: answer(Answer{Outcome: Succeeded}), secret: []byte("another-secret-77-0123456789abcdefghij"), want: notSent},
		{name: "503", act: status(http.StatusServiceUnavailable), want: unknown, is: ErrBadAnswer},
		{name: "another order's answer", act: answer(Answer{OrderNo: "PS-ANOTHER", Outcome: NotFound}), want: unknown, is: ErrBadAnswer},
		{name: "server hangs", act: hang(), timeout: 200 * time.Millisecond, want: timedOut},
	})
}

// TestClose: CLOSED, processed or not, is a CloseResult; every other
// answer, or a CLOSED that contradicts itself, is an error.
func TestClose(t *testing.T) {
	runCalls(t, PathClose, closeOrder, []callCase[channel.CloseResult]{
		{name: "processed, succeeded", act: answer(Answer{Outcome: Closed, Processed: true, Result: Succeeded, TradeNo: "T9"}),
			want: answered, res: channel.CloseResult{Processed: true, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}},
		{name: "processed, declined", act: answer(Answer{Outcome: Closed, Processed: true, Result: Declined, Code: "EXPIRED", Reason: "card expired"}),
			want: answered, res: channel.CloseResult{Processed: true, Result: channel.Result{Status: channel.Declined, DeclineCode: "EXPIRED", DeclineReason: "card expired"}}},
		{name: "unprocessed", act: answer(Answer{Outcome: Closed}), want: answered, res: channel.CloseResult{}},
		{name: "processed without a result", act: answer(Answer{Outcome: Closed, Processed: true}), want: unknown, is: ErrBadAnswer},
		{name: "processed, still processing", act: answer(Answer{Outcome: Closed, Processed: true, Result: Processing}), want: unknown, is: ErrBadAnswer},
		{name: "unprocessed with a result", act: answer(Answer{Outcome: Closed, Result: Succeeded}), want: unknown, is: ErrBadAnswer},
		{name: "SUCCEEDED to a close", act: answer(Answer{Outcome: Succeeded, TradeNo: "T9"}), want: unknown, is: ErrBadAnswer},
		{name: "NOT_FOUND to a close", act: answer(Answer{Outcome: NotFound}), want: unknown, is: ErrBadAnswer},
		{name: "throttled", act: answer(Answer{Outcome: Throttled}), want: throttled},
		{name: "401", act: answer(Answer{Outcome: Closed}), secret: []byte("another-secret-77-0123456789abcdefghij"), want: notSent},
		{name: "bad signature", act: answerSigned(Answer{Outcome: Closed}, []byte("not-the-secret"), 0), want: unknown, is: ErrBadSignature},
		{name: "server hangs", act: hang(), timeout: 200 * time.Millisecond, want: timedOut},
	})
}

// TestPayNotConnected: a pay that never had a connection is ErrNotSent,
// whatever stopped it, and takes no longer than ConnectTimeout. The
// refused connection is a real closed loopback port. A TCP connect that
// times out cannot be made on loopback (the kernel completes handshakes
// whether or not accept is called), so that case, and a DNS failure, go
// through the real dialer wrapper with its connect replaced; the TLS
// handshake timeout against a real silent listener is in tls_test.go.
func TestPayNotConnected(t *testing.T) {
	blocked := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
	}
	noHost := func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "gateway.invalid", IsNotFound: true}}
	}
	cases := []struct {
		name    string
		connect func(context.Context, string, string) (net.Conn, error) // nil: the real one
		is      error
	}{
		{name: "connection refused", is: syscall.ECONNREFUSED},
		{name: "connect timeout", connect: blocked, is: context.DeadlineExceeded},
		{name: "DNS failure", connect: noHost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, logs := testLogger()
			cfg := testConfig("http://" + testutil.FreeAddr(t)) // nothing listens: refused
			cfg.ConnectTimeout, cfg.CallTimeout = 50*time.Millisecond, 5*time.Second
			ch := mustChannel(t, cfg, logger)
			if tc.connect != nil {
				ch.transport.DialContext = (&dialer{connect: tc.connect, timeout: cfg.ConnectTimeout}).dial
			}
			start := time.Now()
			_, err := ch.Pay(context.Background(), testOrder)
			if classOf(err) != notSent {
				t.Fatalf("err %v, want ErrNotSent", err)
			}
			var de *dialError
			if !errors.As(err, &de) {
				t.Errorf("err %v, want a dial error", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err %v, want it to be %v", err, tc.is)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v, want about ConnectTimeout (%v)", d, cfg.ConnectTimeout)
			}
			if w := atLevel(records(t, logs), slog.LevelWarn); len(w) != 1 || w[0]["orderNo"] != testOrder.OrderNo {
				t.Errorf("want one Warn naming the order: %s", logs)
			}
			assertNoSecrets(t, logs.String(), nil)
		})
	}
}

// TestPayCallerContext: the caller's ctx ending (deadline or cancel)
// before the answer is ErrTimeout, never ErrNotSent; ending before the
// call is ErrNotSent.
func TestPayCallerContext(t *testing.T) {
	g := newTestGateway(t, hang())
	ch := mustChannel(t, testConfig(g.srv.URL), nil)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := ch.Pay(ctx, testOrder); classOf(err) != timedOut {
		t.Errorf("deadline: err %v, want ErrTimeout", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := ch.Pay(ctx, testOrder); classOf(err) != timedOut {
		t.Errorf("cancel: err %v, want ErrTimeout", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := ch.Pay(ctx, testOrder); classOf(err) != notSent {
		t.Errorf("ended before: err %v, want ErrNotSent", err)
	}
	if n := len(g.requests()); n != 2 {
		t.Errorf("the gateway got %d requests, want 2", n)
	}
}

// TestPayWaitingForConnection: a pay whose time runs out while every one
// of MaxConns connections is busy never had a connection: ErrNotSent, and
// the gateway never sees it.
func TestPayWaitingForConnection(t *testing.T) {
	release := make(chan struct{})
	g := newTestGateway(t, func(g *testGateway, w http.ResponseWriter, r *http.Request, req gotRequest) {
		if req.OrderNo == "PS-FIRST" {
			<-release
		}
		answer(Answer{Outcome: Succeeded, TradeNo: "T1"})(g, w, r, req)
	})
	cfg := testConfig(g.srv.URL)
	cfg.MaxConns = 1
	ch := mustChannel(t, cfg, nil)

	first := make(chan error, 1)
	go func() {
		r := testOrder
		r.OrderNo = "PS-FIRST"
		_, err := ch.Pay(context.Background(), r)
		first <- err
	}()
	for deadline := time.Now().Add(2 * time.Second); len(g.requests()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first pay never reached the gateway")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := ch.Pay(ctx, testOrder)
	if classOf(err) != notSent || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want ErrNotSent (deadline while waiting for a connection)", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first pay: %v", err)
	}
	for _, r := range g.requests() {
		if r.OrderNo == testOrder.OrderNo {
			t.Errorf("the gateway got the pay that was not sent")
		}
	}
}

// TestNeverRepeated: a pay, query or close on a reused connection that the
// gateway drops after reading is not sent again on a new connection: the
// outcome is unknown, and the gateway got the request once.
func TestNeverRepeated(t *testing.T) {
	for _, tc := range []struct {
		path string
		call func(*Channel, context.Context, channel.Request) error
	}{
		{PathPay, func(ch *Channel, ctx context.Context, r channel.Request) error { _, err := pay(ch, ctx, r); return err }},
		{PathQuery, func(ch *Channel, ctx context.Context, r channel.Request) error {
			_, err := query(ch, ctx, r)
			return err
		}},
		{PathClose, func(ch *Channel, ctx context.Context, r channel.Request) error {
			_, err := closeOrder(ch, ctx, r)
			return err
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := newTestGateway(t, func(g *testGateway, w http.ResponseWriter, r *http.Request, req gotRequest) {
				if req.OnConn == 2 {
					hangUp()(g, w, r, req)
					return
				}
				answer(Answer{Outcome: Succeeded, TradeNo: "T-" + req.OrderNo})(g, w, r, req)
			})
			logger, logs := testLogger()
			ch := mustChannel(t, testConfig(g.srv.URL), logger)
			warmup := testOrder
			warmup.OrderNo = "PS-WARMUP"
			if _, err := ch.Pay(context.Background(), warmup); err != nil {
				t.Fatalf("warm-up pay: %v", err)
			}
			err := tc.call(ch, context.Background(), testOrder)
			if got := classOf(err); got != unknown {
				t.Fatalf("class %s (err %v), want unknown", got, err)
			}
			var onConns []int32
			for _, r := range g.requests() {
				if r.OrderNo == testOrder.OrderNo {
					onConns = append(onConns, r.OnConn)
				}
			}
			if fmt.Sprint(onConns) != "[2]" {
				t.Errorf("the gateway got the request as request %v on its connections, want [2] (once, on the reused one)", onConns)
			}
			assertNoSecrets(t, logs.String(), g)
		})
	}
}

// TestSignedRequests: requests are signed with the channel's secret at
// the Channel's clock (the gateway checks them at the same instant), and
// its answers are checked at that clock too.
func TestSignedRequests(t *testing.T) {
	at := time.Unix(1764200000, 0)
	g := newTestGateway(t, answer(Answer{Outcome: Succeeded, TradeNo: "T1"}))
	g.now = func() time.Time { return at }
	ch, err := NewChannel(testConfig(g.srv.URL), nil, func() time.Time { return at.Add(time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	defer ch.CloseIdle()
	if _, err := ch.Pay(context.Background(), testOrder); err != nil {
		t.Fatalf("Pay: %v", err)
	}
	got := g.requests()
	if len(got) != 1 || !got[0].Signed || got[0].Timestamp != "1764200060" {
		t.Errorf("the gateway got %+v, want one request signed at 1764200060", got)
	}
	// An answer signed more than MaxSkew before the Channel's clock is stale.
	late := at.Add(MaxSkew + time.Minute)
	g = newTestGateway(t, answerSigned(Answer{Outcome: Succeeded}, nil, -MaxSkew-time.Second))
	g.now = func() time.Time { return late }
	ch, err = NewChannel(testConfig(g.srv.URL), nil, func() time.Time { return late })
	if err != nil {
		t.Fatal(err)
	}
	defer ch.CloseIdle()
	if _, err := ch.Pay(context.Background(), testOrder); classOf(err) != unknown || !errors.Is(err, ErrBadSignature) {
		t.Errorf("stale answer: err %v, want an unknown outcome (bad signature)", err)
	}
}
