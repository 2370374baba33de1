package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"payserver/internal/channel/gateway"
)

// maxBody bounds a gateway call's body.
const maxBody = 1 << 20

func (e *Emulator) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/{code}/{op}", e.serveGateway)
	mux.HandleFunc("/admin/channels/{code}", e.serveAdmin)
	mux.HandleFunc("/ledger", e.serveLedger)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such path: "+r.URL.Path)
	})
	return mux
}

// call is one gateway call on its way through the steps of the package
// doc.
type call struct {
	e    *Emulator
	ch   *channelState
	w    http.ResponseWriter
	r    *http.Request
	body []byte
	// line is the call's ledger line, filled as the call goes.
	line Line
}

func (e *Emulator) serveGateway(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	code := r.PathValue("code")
	ch, ok := e.channels[code]
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "no channel "+code+" here")
		return
	}
	var op Op
	switch r.PathValue("op") {
	case "pay":
		op = OpPay
	case "query":
		op = OpQuery
	case "close":
		op = OpClose
	default:
		writeError(w, http.StatusNotFound, codeNotFound, "no such path: "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "use POST")
		return
	}
	c := &call{e: e, ch: ch, w: w, r: r, line: Line{Op: op, Channel: code, ReceivedAtUs: received.UnixMicro(), Outcome: OutcomeNone}}
	c.serve()
}

func (c *call) serve() {
	// The body is read at once, only to name the order in the books: a
	// refused call is not processed all the same.
	body, readErr := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, maxBody))
	c.body = body
	c.describe()
	if !c.ch.pause.wait(c.e.stop) {
		c.fail(http.StatusServiceUnavailable, codeShuttingDown, "the emulator is stopping")
		return
	}
	b := *c.ch.behaviour.Load()
	if c.e.rand.hit(b.RefuseRate) {
		c.line.Fault = FaultRefuse
		c.recordFault()
		c.resetConn()
		return
	}
	if readErr != nil {
		c.fail(http.StatusBadRequest, codeInvalidRequest, "reading the body: "+readErr.Error())
		return
	}
	if status, message := c.verify(); status != 0 {
		c.fail(status, codeBadSignature, message)
		return
	}
	decide, err := c.parse()
	if err != nil {
		c.fail(http.StatusBadRequest, codeInvalidRequest, err.Error())
		return
	}
	if !c.e.sleep(b.Latency.draw(c.e.rand.float())) {
		c.fail(http.StatusServiceUnavailable, codeShuttingDown, "the emulator is stopping")
		return
	}
	if c.e.rand.hit(b.DropRate) {
		c.line.Fault = FaultDrop
		c.recordFault()
		c.hold(b.Hold)
		return
	}
	if c.e.rand.hit(b.ErrorRate) {
		c.line.Fault = FaultError
		c.fail(http.StatusServiceUnavailable, codeSystemError, "emulated channel system error")
		return
	}
	lost := c.e.rand.hit(b.LostAnswerRate)
	if lost {
		c.line.Fault = FaultLostAnswer
	}
	answer, err := decide(b)
	if rf := (*refusal)(nil); errors.As(err, &rf) {
		c.line.Fault = ""
		c.fail(rf.status, rf.code, rf.message)
		return
	}
	if err != nil {
		c.e.log.Error("gateway call not recorded", "channel", c.ch.code, "op", c.line.Op, "orderNo", c.line.OrderNo, "err", err)
		c.writeSigned(http.StatusInternalServerError, newError(codeInternal, "the ledger could not be written; nothing was processed"))
		return
	}
	c.e.log.Debug("gateway call", "channel", c.ch.code, "op", c.line.Op, "orderNo", c.line.OrderNo, "outcome", c.line.Outcome, "fault", c.line.Fault)
	if lost {
		c.hold(b.Hold)
		return
	}
	c.writeSigned(http.StatusOK, answer)
}

// verify checks the call's signature under the channel's keys, then its
// nonce against the ones seen within the window. It returns 0 for a call
// to take, or the status and message of its refusal: 401 for a bad,
// stale or replayed signature or an unknown key, 503 when the nonce cache
// is full (nothing is forgotten early; the caller may try again later).
func (c *call) verify() (int, string) {
	now := time.Now()
	msg := gateway.Message{Method: c.r.Method, Path: c.r.URL.EscapedPath(), Body: c.body}
	signed, err := gateway.Verify(c.r.Header, *c.ch.keys.Load(), msg, now)
	if err == nil {
		err = c.e.nonces.Add(c.ch.code, signed.Nonce, now)
	}
	if err == nil {
		return 0, ""
	}
	reason, _ := gateway.ReasonOf(err)
	c.e.log.Warn("gateway call refused: bad or stale signature", "channel", c.ch.code, "op", c.line.Op, "orderNo", c.line.OrderNo,
		"remote", c.r.RemoteAddr, "reason", reason, "err", err)
	if errors.Is(err, gateway.ErrNonceCacheFull) {
		return http.StatusServiceUnavailable, "the nonce cache is full; try again later"
	}
	return http.StatusUnauthorized, "bad or stale signature (" + string(reason) + ")"
}

// describe fills the line from the body as far as it can be read, before
// anything is checked: a refused or unsigned call is named in the books
// too.
func (c *call) describe() {
	var probe struct {
		OrderNo   string `json:"orderNo"`
		RequestID string `json:"requestId"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
	}
	_ = json.Unmarshal(c.body, &probe) // best effort: fields of the wrong type stay empty
	c.line.OrderNo, c.line.RequestID = probe.OrderNo, probe.RequestID
	c.line.Amount, c.line.Currency = probe.Amount, probe.Currency
}

// fillFromOrder completes a line from the order's records: its requestId
// when the call did not carry one, and a query's or close's amount and
// currency (the order's, when the gateway has them).
func (c *call) fillFromOrder(o Order, found bool) {
	if !found {
		return
	}
	if c.line.RequestID == "" {
		c.line.RequestID = o.RequestID
	}
	if c.line.Op != OpPay && o.Amount != 0 {
		c.line.Amount, c.line.Currency = o.Amount, o.Currency
	}
}

// parse reads the call's body strictly (unknown fields refused) and
// returns the decision to make.
func (c *call) parse() (func(Behaviour) (gateway.Answer, error), error) {
	if c.line.Op == OpPay {
		var req gateway.PayRequest
		if err := decodeStrict(c.body, &req); err != nil {
			return nil, err
		}
		switch {
		case req.OrderNo == "":
			return nil, errors.New("orderNo is required")
		case req.RequestID == "":
			return nil, errors.New("requestId is required")
		case req.Amount < 1:
			return nil, fmt.Errorf("amount %d: want at least 1 (minor units)", req.Amount)
		case !isCurrency(req.Currency):
			return nil, fmt.Errorf("currency %q: want three upper-case letters", req.Currency)
		}
		return func(b Behaviour) (gateway.Answer, error) { return c.pay(req, b) }, nil
	}
	var req gateway.OrderRequest
	if err := decodeStrict(c.body, &req); err != nil {
		return nil, err
	}
	if req.OrderNo == "" {
		return nil, errors.New("orderNo is required")
	}
	if c.line.Op == OpQuery {
		return func(Behaviour) (gateway.Answer, error) { return c.query(req) }, nil
	}
	return func(b Behaviour) (gateway.Answer, error) { return c.close(req, b) }, nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return errors.New("body: data after the JSON object")
	}
	return nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// pay decides a payment: a replay of the order's outcome, a decline of a
// closed order, THROTTLED, or a new outcome (written with the order).
func (c *call) pay(req gateway.PayRequest, b Behaviour) (gateway.Answer, error) {
	unlock := c.e.lockOrder(c.ch.code, req.OrderNo)
	defer unlock()
	now := time.Now()
	prev, found := c.e.store.Order(c.ch.code, req.OrderNo)
	switch {
	case found && prev.Processed():
		a := prev.Status(now)
		c.line.Outcome, c.line.TradeNo, c.line.Code = a.Outcome, prev.TradeNo, a.Code
		return a, c.record(nil)
	case found && prev.Closed:
		a := gateway.Answer{OrderNo: req.OrderNo, Outcome: gateway.Declined, Code: declineOrderClosed, Reason: "the order was closed before it was processed"}
		c.line.Outcome, c.line.Code = a.Outcome, a.Code
		return a, c.record(nil)
	}
	if ok, wait := c.ch.admit(now, b); !ok {
		c.line.Outcome = gateway.Throttled
		return gateway.Answer{OrderNo: req.OrderNo, Outcome: gateway.Throttled, RetryAfterMs: (wait + time.Millisecond - 1).Milliseconds()}, c.record(nil)
	}
	o := Order{Channel: c.ch.code, OrderNo: req.OrderNo, RequestID: req.RequestID, Amount: req.Amount, Currency: req.Currency}
	if c.e.rand.hit(b.DeclineRate) {
		o.Outcome, o.Code, o.Reason = gateway.Declined, declineInsufficientFunds, "emulated decline"
	} else {
		o.Outcome, o.TradeNo = gateway.Succeeded, newTradeNo(c.ch.code)
	}
	if c.e.rand.hit(b.ProcessingRate) {
		o.RevealAt = now.Add(b.Processing)
	}
	a := o.Status(now)
	c.line.Outcome, c.line.MoneyMoved, c.line.TradeNo, c.line.Code = a.Outcome, o.MoneyMoved(), o.TradeNo, a.Code
	if err := c.record(&o); err != nil {
		c.ch.forget(now)
		return a, err
	}
	c.e.notify(c.ch.code, b, o)
	return a, nil
}

// query answers an order's outcome, PROCESSING, or NOT_FOUND (also for a
// closed order never processed).
func (c *call) query(req gateway.OrderRequest) (gateway.Answer, error) {
	unlock := c.e.lockOrder(c.ch.code, req.OrderNo)
	defer unlock()
	o, found := c.e.store.Order(c.ch.code, req.OrderNo)
	a := gateway.Answer{OrderNo: req.OrderNo, Outcome: gateway.NotFound}
	if found && o.Processed() {
		a = o.Status(time.Now())
		c.line.TradeNo = o.TradeNo
	}
	c.line.Outcome, c.line.Code = a.Outcome, a.Code
	return a, c.record(nil)
}

// refusal is a call the channel's rules refuse, answered with status and
// code; nothing is processed.
type refusal struct {
	status        int
	code, message string
}

func (r *refusal) Error() string { return r.code + ": " + r.message }

// close closes an order (remembering it when it was unknown) and says
// whether it had been processed. Within b.CloseAfter of the first pay of
// the order it received, the close is refused (*refusal).
func (c *call) close(req gateway.OrderRequest, b Behaviour) (gateway.Answer, error) {
	unlock := c.e.lockOrder(c.ch.code, req.OrderNo)
	defer unlock()
	if b.CloseAfter > 0 {
		first, seen, err := c.e.store.FirstPay(context.WithoutCancel(c.r.Context()), c.ch.code, req.OrderNo)
		if err != nil {
			return gateway.Answer{}, err
		}
		if left := b.CloseAfter - time.Since(first); seen && left > 0 {
			return gateway.Answer{}, &refusal{status: http.StatusConflict, code: b.CloseTooSoonCode,
				message: fmt.Sprintf("an order can be closed %v after its pay; %v left", b.CloseAfter, left.Round(time.Millisecond))}
		}
	}
	o, found := c.e.store.Order(c.ch.code, req.OrderNo)
	if !found {
		o = Order{Channel: c.ch.code, OrderNo: req.OrderNo, RequestID: req.RequestID, Amount: req.Amount, Currency: req.Currency}
	}
	next := o.closedAt(time.Now())
	c.line.Outcome, c.line.TradeNo = gateway.Closed, o.TradeNo
	var write *Order
	if !found || !o.Closed || !next.RevealAt.Equal(o.RevealAt) {
		write = &next
	}
	return next.CloseAnswer(), c.record(write)
}

// record writes the call's line (and o) durably, completed from the
// order's records; the request's end does not cancel the write.
func (c *call) record(o *Order) error {
	prev, found := c.e.store.Order(c.ch.code, c.line.OrderNo)
	c.fillFromOrder(prev, found)
	var err error
	c.line, err = c.e.store.Append(context.WithoutCancel(c.r.Context()), c.line, o)
	return err
}

// recordFault records a call that is not answered (refused, dropped),
// logging a failure: the call goes on unanswered all the same.
func (c *call) recordFault() {
	if err := c.record(nil); err != nil {
		c.e.log.Error("gateway call not recorded", "channel", c.ch.code, "op", c.line.Op, "orderNo", c.line.OrderNo, "fault", c.line.Fault, "err", err)
	}
}

// fail records the call as an error and answers it.
func (c *call) fail(status int, code, message string) {
	c.line.Outcome, c.line.Code = OutcomeError, code
	if err := c.record(nil); err != nil {
		c.e.log.Error("gateway call not recorded", "channel", c.ch.code, "op", c.line.Op, "orderNo", c.line.OrderNo, "err", err)
	}
	c.writeSigned(status, newError(code, message))
}

// writeSigned sends v as JSON, signed.
func (c *call) writeSigned(status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"encoding the answer"}}`)
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	key := (*c.ch.keys.Load())[0]
	gateway.Sign(h, key, gateway.Message{Method: c.r.Method, Path: c.r.URL.EscapedPath(), Body: body, Answer: true}, time.Now())
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}

// hold keeps the connection open without a byte for d, or until the
// client leaves or the emulator stops, then closes it (FIN).
func (c *call) hold(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.r.Context().Done():
	case <-c.e.stop:
	}
	c.closeConn()
}

// closeConn closes the call's connection without an answer (FIN: the
// client reads EOF).
func (c *call) closeConn() {
	if conn := c.hijack(); conn != nil {
		_ = conn.Close()
	}
}

// resetConn resets the call's connection without an answer (RST: the
// client reads "connection reset by peer").
func (c *call) resetConn() {
	conn := c.hijack()
	if conn == nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// hijack takes the call's connection from the HTTP server.
func (c *call) hijack() net.Conn {
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): abort the response, which the server
		// turns into a reset of the stream, so no answer goes out.
		panic(http.ErrAbortHandler)
	}
	return conn
}

// newTradeNo is a fresh trade number of a SUCCEEDED payment.
func newTradeNo(channel string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "EMU-" + channel + "-" + hex.EncodeToString(b[:])
}
