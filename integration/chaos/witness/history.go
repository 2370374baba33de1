package witness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// History is everything a campaign recorded: the run's settings, the client
// log, the orders table, the emulator's ledger, the limits documents, the
// faults and the final window members. Its file form is JSON lines, one
// record a line (Record); see doc.go.
type History struct {
	Config  Config
	Ops     []Op
	Orders  []Order
	Ledger  []LedgerEntry
	Limits  []LimitsDoc
	Faults  []Fault
	Members []Member
}

// Config is the run's settings and its end.
type Config struct {
	// Instances is how many payserver instances shared the limits
	// (PAYSERVER_INSTANCE_COUNT); 0 means 1.
	Instances int `json:"instances,omitempty"`
	// Policy is PAYSERVER_LIMITER_POLICY: "local" (also ""), "allow" or
	// "deny".
	Policy string `json:"policy,omitempty"`
	// NearCacheOff is true when the instances run with limiter.nearCache
	// false.
	NearCacheOff bool `json:"nearCacheOff,omitempty"`
	// QuietFromUs is when the load stopped (Unix µs): after it the runner
	// sent no operation and waited for every order to end.
	QuietFromUs int64 `json:"quietFromUs"`
	// DumpedAtUs is when the orders, the ledger and the window members
	// were read (Redis TIME for the members, Unix µs).
	DumpedAtUs int64 `json:"dumpedAtUs"`
}

// Op is one client operation: what was sent, when, and what came back.
type Op struct {
	// Seq numbers the operations of the run, unique.
	Seq int64 `json:"seq"`
	// Client is the runner's worker that sent it; Instance the payserver
	// instance it went to.
	Client   string `json:"client,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Kind is "pay" (POST /pay), "getPay" (GET /pay/{requestId}),
	// "acquire" (POST /v1/limits/acquire) or "release"
	// (POST /v1/limits/release).
	Kind      string `json:"kind"`
	RequestID string `json:"requestId"`
	BizType   string `json:"bizType,omitempty"`
	// Channel is as sent; "" for a routed payment.
	Channel  string `json:"channel,omitempty"`
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// MerchantID is the merchant as sent; "" for none.
	MerchantID string `json:"merchantId,omitempty"`
	// InvokeUs is when the request left the client (Unix µs); CompleteUs
	// when its answer arrived, 0 when none did.
	InvokeUs   int64 `json:"invokeUs"`
	CompleteUs int64 `json:"completeUs,omitempty"`
	// Status is the HTTP status; 0 when there was no answer (Error says
	// why).
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  string          `json:"error,omitempty"`
	// AdmittedAtUs, for an admitted acquire, is the member's score in its
	// sliding window (Redis µs) when the runner read it; 0 when not read.
	AdmittedAtUs int64 `json:"admittedAtUs,omitempty"`
}

// Order is one row of the orders table (migrations/mysql), DATETIME
// columns as Unix µs.
type Order struct {
	OrderNo        string `json:"order_no"`
	RequestID      string `json:"request_id"`
	BizType        string `json:"biz_type"`
	Channel        string `json:"channel"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	MerchantID     string `json:"merchant_id"`
	Status         string `json:"status"`
	ChannelTradeNo string `json:"channel_trade_no,omitempty"`
	FailureCode    string `json:"failure_code,omitempty"`
	CreatedAtUs    int64  `json:"created_at_us"`
	UpdatedAtUs    int64  `json:"updated_at_us"`
	RoutedFrom     string `json:"routed_from,omitempty"`
	AdmittedAtUs   int64  `json:"admitted_at_us"`
	AdmittedKeys   string `json:"admitted_keys,omitempty"`
	LimitsVersion  string `json:"limits_version"`
	ResolvedBy     string `json:"resolved_by,omitempty"`
	ResolvedAtUs   int64  `json:"resolved_at_us,omitempty"`
}

// LedgerEntry is one line of the emulator's GET /ledger (README.md, "The
// channel emulator"), as served.
type LedgerEntry struct {
	Seq          int64  `json:"seq"`
	Op           string `json:"op"`
	Channel      string `json:"channel"`
	OrderNo      string `json:"orderNo"`
	RequestID    string `json:"requestId"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	ReceivedAtUs int64  `json:"receivedAtUs"`
	Outcome      string `json:"outcome"`
	MoneyMoved   bool   `json:"moneyMoved"`
	TradeNo      string `json:"tradeNo,omitempty"`
	Code         string `json:"code,omitempty"`
	Fault        string `json:"fault,omitempty"`
}

// LimitsDoc is a limits document and when it was in force.
type LimitsDoc struct {
	// Version is its MD5 (hex), as orders.limits_version records it; ""
	// lets the witness compute it from Raw.
	Version string `json:"version,omitempty"`
	// Raw is the document's bytes as published.
	Raw string `json:"raw"`
	// FromUs is when it was published (the first instance may apply it);
	// ToUs when every instance had applied the next one (0: to the end).
	// The intervals of consecutive documents overlap by the propagation.
	FromUs int64 `json:"fromUs"`
	ToUs   int64 `json:"toUs,omitempty"`
}

// Fault is an interval during which the runner broke something.
type Fault struct {
	// Kind is "redis" (the limiter's store unreachable, paused, failed
	// over or restarted), or any other dependency or process the runner
	// broke: "mariadb", "emulator", "channel", "instance", "nacos",
	// "network".
	Kind string `json:"kind"`
	// Target narrows it: a payserver instance, or for "redis" a channel
	// whose hash slot failed over; "" is everything of its kind.
	Target string `json:"target,omitempty"`
	FromUs int64  `json:"fromUs"`
	ToUs   int64  `json:"toUs"`
	// LostWrites, for "redis", is λ: how many acknowledged window writes
	// the fault may have lost (a killed master's unreplicated writes);
	// -1 when Redis lost its data (restarted empty): a whole window.
	LostWrites int64 `json:"lostWrites,omitempty"`
}

// Member is one member of a limiter window in Redis at the end of the run:
// a sorted set's member with its score, or a calendar hash's field with its
// amount.
type Member struct {
	// Key is the Redis key, payserver:rl:{CHANNEL}:BIZTYPE:<window id>.
	Key     string `json:"key"`
	Member  string `json:"member"`
	ScoreUs int64  `json:"scoreUs,omitempty"`
	Amount  int64  `json:"amount,omitempty"`
}

// Record is one line of a history file: exactly one field is set.
type Record struct {
	Config *Config      `json:"config,omitempty"`
	Op     *Op          `json:"op,omitempty"`
	Order  *Order       `json:"order,omitempty"`
	Ledger *LedgerEntry `json:"ledger,omitempty"`
	Limits *LimitsDoc   `json:"limits,omitempty"`
	Fault  *Fault       `json:"fault,omitempty"`
	Member *Member      `json:"member,omitempty"`
}

// ReadHistory reads a history file: JSON lines of Records, in any order
// (the last config line wins). Empty lines are skipped; any other line
// that is not exactly one known record is an error naming its line.
func ReadHistory(r io.Reader) (History, error) {
	var h History
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return h, fmt.Errorf("line %d: %w", line, err)
		}
		n := 0
		if rec.Config != nil {
			h.Config, n = *rec.Config, n+1
		}
		if rec.Op != nil {
			h.Ops, n = append(h.Ops, *rec.Op), n+1
		}
		if rec.Order != nil {
			h.Orders, n = append(h.Orders, *rec.Order), n+1
		}
		if rec.Ledger != nil {
			h.Ledger, n = append(h.Ledger, *rec.Ledger), n+1
		}
		if rec.Limits != nil {
			h.Limits, n = append(h.Limits, *rec.Limits), n+1
		}
		if rec.Fault != nil {
			h.Faults, n = append(h.Faults, *rec.Fault), n+1
		}
		if rec.Member != nil {
			h.Members, n = append(h.Members, *rec.Member), n+1
		}
		if n != 1 {
			return h, fmt.Errorf("line %d: want exactly one of config, op, order, ledger, limits, fault, member; got %d", line, n)
		}
	}
	return h, sc.Err()
}

// WriteHistory writes h as JSON lines, the form ReadHistory reads.
func WriteHistory(w io.Writer, h History) error {
	enc := json.NewEncoder(w)
	recs := []Record{{Config: &h.Config}}
	for i := range h.Limits {
		recs = append(recs, Record{Limits: &h.Limits[i]})
	}
	for i := range h.Faults {
		recs = append(recs, Record{Fault: &h.Faults[i]})
	}
	for i := range h.Ops {
		recs = append(recs, Record{Op: &h.Ops[i]})
	}
	for i := range h.Orders {
		recs = append(recs, Record{Order: &h.Orders[i]})
	}
	for i := range h.Ledger {
		recs = append(recs, Record{Ledger: &h.Ledger[i]})
	}
	for i := range h.Members {
		recs = append(recs, Record{Member: &h.Members[i]})
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// excerpt is one record as a history line, for a violation's excerpt.
func excerpt(r Record) string {
	b, err := json.Marshal(r)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
