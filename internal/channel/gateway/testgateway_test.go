package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// testCode and testSecret are the channel the tests talk to.
const testCode = "TESTPAY"

var testSecret = []byte("gateway-test-secret-3f9a1c-0123456789")

// keysOf is the one key (id "default") of secret.
func keysOf(secret []byte) Keys { return Keys{{ID: "default", Secret: secret}} }

// testGateway speaks the gateway protocol on a loopback socket: it checks
// every request's signature with Verify (401 when bad, as the protocol
// says), decodes its body strictly, records it, and then acts as its
// behaviour says.
type testGateway struct {
	t      testing.TB
	secret []byte
	now    func() time.Time // its clock, for checking requests and signing answers
	act    behaviour
	srv    *httptest.Server
	done   chan struct{} // closed at the test's end: hanging behaviours return

	conns atomic.Int32
	mu    sync.Mutex
	reqs  []gotRequest
	sigs  []string // every signature received or sent
}

// gotRequest is one request as the test gateway got it.
type gotRequest struct {
	Path      string
	OrderNo   string
	Pay       PayRequest   // for PathPay
	Order     OrderRequest // for PathQuery and PathClose
	Timestamp string
	Signed    bool // its signature verified
	Conn      int32
	OnConn    int32 // 1 for the first request on its connection
	PeerCN    string
	Reused    bool
}

// behaviour is how the test gateway answers a request it verified.
type behaviour func(g *testGateway, w http.ResponseWriter, r *http.Request, req gotRequest)

type connKey struct{}

type connInfo struct {
	id       int32
	requests atomic.Int32
}

// newTestGateway starts a plain-HTTP test gateway acting as act.
func newTestGateway(t testing.TB, act behaviour) *testGateway {
	g := newUnstartedGateway(t, act)
	g.srv.Start()
	return g
}

func newUnstartedGateway(t testing.TB, act behaviour) *testGateway {
	g := &testGateway{t: t, secret: testSecret, now: time.Now, act: act, done: make(chan struct{})}
	g.srv = httptest.NewUnstartedServer(g)
	g.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connInfo{id: g.conns.Add(1)})
	}
	t.Cleanup(g.srv.Close)
	t.Cleanup(func() { close(g.done) }) // runs before srv.Close
	return g
}

func (g *testGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	info := r.Context().Value(connKey{}).(*connInfo)
	req := gotRequest{
		Path: r.URL.Path, Timestamp: r.Header.Get(HeaderTimestamp),
		Conn: info.id, OnConn: info.requests.Add(1),
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		req.PeerCN = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	g.mu.Lock()
	g.sigs = append(g.sigs, r.Header.Get(HeaderSignature))
	g.mu.Unlock()
	if _, err := Verify(r.Header, keysOf(g.secret), Message{Method: r.Method, Path: r.URL.EscapedPath(), Body: body}, g.now()); err != nil {
		g.record(req)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	req.Signed = true
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch r.URL.Path {
	case PathPay:
		err = dec.Decode(&req.Pay)
		req.OrderNo = req.Pay.OrderNo
	case PathQuery, PathClose:
		err = dec.Decode(&req.Order)
		req.OrderNo = req.Order.OrderNo
	default:
		g.t.Errorf("test gateway: request to %s", r.URL.Path)
	}
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		g.t.Errorf("test gateway: %s %s (%s): %s: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), body, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	g.record(req)
	g.act(g, w, r, req)
}

func (g *testGateway) record(req gotRequest) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reqs = append(g.reqs, req)
}

// requests returns what the gateway got so far.
func (g *testGateway) requests() []gotRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gotRequest(nil), g.reqs...)
}

// signatures returns every signature the gateway received or sent.
func (g *testGateway) signatures() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sigs...)
}

// reply writes body as a 200 answer to r signed with secret at time at.
func (g *testGateway) reply(w http.ResponseWriter, r *http.Request, body []byte, secret []byte, at time.Time) {
	Sign(w.Header(), keysOf(secret)[0], answerTo(r, body), at)
	g.mu.Lock()
	g.sigs = append(g.sigs, w.Header().Get(HeaderSignature))
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// answerTo is the signed message of an answer body to r.
func answerTo(r *http.Request, body []byte) Message {
	return Message{Method: r.Method, Path: r.URL.EscapedPath(), Body: body, Answer: true}
}

// mustJSON is a's JSON.
func mustJSON(tb testing.TB, a any) []byte {
	tb.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// answer answers a, about the request's order unless a names one.
func answer(a Answer) behaviour {
	return answerSigned(a, nil, 0)
}

// answerSigned answers a signed with secret (nil: the gateway's) by a
// clock skew off the gateway's.
func answerSigned(a Answer, secret []byte, skew time.Duration) behaviour {
	return func(g *testGateway, w http.ResponseWriter, r *http.Request, req gotRequest) {
		a := a
		if a.OrderNo == "" {
			a.OrderNo = req.OrderNo
		}
		s := secret
		if s == nil {
			s = g.secret
		}
		g.reply(w, r, mustJSON(g.t, a), s, g.now().Add(skew))
	}
}

// rawAnswer answers body, correctly signed.
func rawAnswer(body []byte) behaviour {
	return func(g *testGateway, w http.ResponseWriter, r *http.Request, _ gotRequest) {
		g.reply(w, r, body, g.secret, g.now())
	}
}

// unsigned answers a without signature headers.
func unsigned(a Answer) behaviour {
	return func(g *testGateway, w http.ResponseWriter, _ *http.Request, req gotRequest) {
		a := a
		a.OrderNo = req.OrderNo
		w.Write(mustJSON(g.t, a))
	}
}

// status answers code with a short body, correctly signed.
func status(code int) behaviour {
	return func(g *testGateway, w http.ResponseWriter, r *http.Request, _ gotRequest) {
		body := []byte(http.StatusText(code))
		Sign(w.Header(), keysOf(g.secret)[0], answerTo(r, body), g.now())
		if code/100 == 3 {
			w.Header().Set("Location", PathPay)
		}
		w.WriteHeader(code)
		w.Write(body)
	}
}

// hang never answers (until the client leaves or the test ends).
func hang() behaviour {
	return func(g *testGateway, _ http.ResponseWriter, r *http.Request, _ gotRequest) {
		select {
		case <-r.Context().Done():
		case <-g.done:
		}
	}
}

// hangMidAnswer sends the answer's headers and a piece of its body, then
// never the rest.
func hangMidAnswer() behaviour {
	return func(g *testGateway, w http.ResponseWriter, r *http.Request, _ gotRequest) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"orderNo":`))
		w.(http.Flusher).Flush()
		hang()(g, w, r, gotRequest{})
	}
}

// hangUp closes the connection after reading the request, answering
// nothing.
func hangUp() behaviour {
	return func(g *testGateway, w http.ResponseWriter, _ *http.Request, _ gotRequest) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			g.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}
}

// hangUpMidAnswer sends part of an answer, then closes the connection.
func hangUpMidAnswer() behaviour {
	return func(g *testGateway, w http.ResponseWriter, _ *http.Request, _ gotRequest) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			g.t.Errorf("hijack: %v", err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"orderNo\":")
		buf.Flush()
		conn.Close()
	}
}

// logRecord is one JSON log line.
type logRecord map[string]any

// testLogger returns a Debug-level JSON logger and its output.
func testLogger() (*slog.Logger, *testutil.LogBuffer) {
	buf := &testutil.LogBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// records parses the log output.
func records(tb testing.TB, buf *testutil.LogBuffer) []logRecord {
	tb.Helper()
	var out []logRecord
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r logRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			tb.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// atLevel returns the records at level.
func atLevel(recs []logRecord, level slog.Level) []logRecord {
	var out []logRecord
	for _, r := range recs {
		if r["level"] == level.String() {
			out = append(out, r)
		}
	}
	return out
}

// assertNoSecrets fails if the logs hold a secret (as text, hex or
// base64) or any signature the gateway saw.
func assertNoSecrets(tb testing.TB, logs string, g *testGateway, secrets ...[]byte) {
	tb.Helper()
	for _, s := range append(secrets, testSecret) {
		if len(s) == 0 {
			continue
		}
		for _, form := range []string{string(s), hex.EncodeToString(s), base64.StdEncoding.EncodeToString(s)} {
			if strings.Contains(logs, form) {
				tb.Errorf("the logs hold a secret (%q)", form)
			}
		}
	}
	if g == nil {
		return
	}
	for _, sig := range g.signatures() {
		if sig != "" && strings.Contains(logs, sig) {
			tb.Errorf("the logs hold a signature %s", sig)
		}
	}
}
