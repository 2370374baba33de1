package pay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"payserver/internal/ratelimit"
)

// TestAHoldAfterItsEndWritesNothing: admissionInFlight's done, called
// before any hold (a request the near-cache refused), must end the
// admission as Ledger.inFlight's done does: a hold after it must not
// write a line that no done will ever remove.
func TestAHoldAfterItsEndWritesNothing(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := NewLedger(nil, lim, LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{ledger: l}
	req := PayRequest{RequestID: "late", BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY"}

	// Ledger.inFlight on its own: done before hold ends it.
	lh, ld := l.inFlight(func() *Order { return &Order{RequestID: "ledger-level", BizType: "B", Channel: "ALIPAY"} }, req.Key())
	ld()
	lh()

	hold, done := s.admissionInFlight(req, req.Key())
	done()
	hold()
	data, _ := os.ReadFile(filepath.Join(dir, inflightName))
	if strings.Contains(string(data), "ledger-level") {
		t.Errorf("Ledger.inFlight: hold after done wrote a line")
	}
	if n := len(l.flight.live); n != 0 {
		t.Fatalf("admissionInFlight: hold after done left %d line(s) in flight, never to be removed:\n%s", n, data)
	}
}
