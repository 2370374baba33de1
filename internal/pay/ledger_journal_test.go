package pay_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// runUntil runs l until the test ends and polls cond for up to 5 s.
func runUntil(t *testing.T, l *pay.Ledger, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, cond)
}

// loserAndWinner returns a limiter holding the loser's day slot "dup" on
// CA, and a store holding the winner's PROCESSING order "dup" on CB.
func loserAndWinner(t *testing.T) (*ratelimit.Limiter, *paytest.MemStore, ratelimit.Decision, *pay.Order) {
	t.Helper()
	lim := localLimiter(t, "limits:\n  B:CA: [{limit: 5, calendar: day}]\n  B:CB: [{limit: 5, calendar: day}]\n")
	store := paytest.NewMemStore()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	d, err := lim.Check(context.Background(), ratelimit.Request{Key: ca, Member: "dup", Amount: 7, Currency: "CNY"})
	if err != nil || !d.Allowed {
		t.Fatalf("the loser's slot: %+v, %v", d, err)
	}
	now := time.Now().UTC()
	winner := &pay.Order{OrderNo: "W1", RequestID: "dup", RequestHash: "w", BizType: "B", Channel: "CB", MerchantID: "M",
		Amount: 7, Currency: "CNY", Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if err := store.Create(context.Background(), winner); err != nil {
		t.Fatal(err)
	}
	return lim, store, d, winner
}

// TestWatchedSlotSurvivesARestart: a slot watched for an order in flight on
// another channel is on disk before Settle returns; a process killed then
// leaves it to the next run, which releases it once that order ends. Kept
// in memory only, such a slot stayed held by nobody until its window
// passed.
func TestWatchedSlotSurvivesARestart(t *testing.T) {
	lim, store, d, winner := loserAndWinner(t)
	ctx := context.Background()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	dir := t.TempDir()
	first, err := pay.NewLedger(store, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	loser := &pay.Order{OrderNo: "L1", RequestID: "dup", BizType: "B", Channel: "CA", Amount: 7, Currency: "CNY"}
	if got := first.Settle(ctx, d.Hold, loser, winner); got.Fate != pay.FateWait {
		t.Fatalf("the loser's slot: %v, want wait", got.Fate)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 1 {
		t.Fatalf("%d files after Settle returned, want the watched slot's", len(files))
	}
	// The first process dies; the next one finds the slot.
	second, err := pay.NewLedger(store, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if second.Size() != 1 {
		t.Fatalf("the next run keeps %d entries, want 1", second.Size())
	}
	winner.Status, winner.ChannelTradeNo = pay.StatusSucceeded, "T1"
	if err := store.Finish(ctx, winner); err != nil {
		t.Fatal(err)
	}
	runUntil(t, second, func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		return dayCount(t, lim, ca) == 0 && len(files) == 0 && second.Size() == 0
	})
}

// TestLedgerMovesTheEarlierFilesIn: the files an earlier version kept in
// its lost-answers and owed-releases directories are taken at start, kept
// in the ledger's directory, and settled: the owed release made, the lost
// answer closed NOT_SENT and its slot released. The old directories go.
func TestLedgerMovesTheEarlierFilesIn(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	ctx := context.Background()
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	owedHold := mustAdmit(t, lim, key, "owed")
	lostHold := mustAdmit(t, lim, key, "lost")
	data := t.TempDir()
	lostDir, owedDir, ledgerDir := filepath.Join(data, "lost-answers"), filepath.Join(data, "owed-releases"), filepath.Join(data, "ledger")
	at := time.Now().Add(-time.Hour).UnixMicro()
	writeFile(t, filepath.Join(owedDir, "a.json"),
		`{"hold":{"key":"`+key.String()+`","member":"owed","windows":`+windowsJSON(owedHold)+`},"atUs":`+itoa(at)+`}`)
	writeFile(t, filepath.Join(lostDir, "b.json"),
		`{"requestId":"lost","bizType":"B","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","holds":[{"key":"`+key.String()+`","member":"lost","windows":`+windowsJSON(lostHold)+`}],"atUs":`+itoa(at)+`}`)
	store := paytest.NewMemStore()
	l, err := pay.NewLedger(store, lim, pay.LedgerOptions{Dir: ledgerDir, Migrate: []string{lostDir, owedDir}})
	if err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(ledgerDir, "*.json")); len(files) != 2 || l.Size() != 2 {
		t.Fatalf("%d files in the ledger, %d entries; want both earlier files moved in", len(files), l.Size())
	}
	for _, dir := range []string{lostDir, owedDir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%s is still there (%v), want it removed once moved", dir, err)
		}
	}
	runUntil(t, l, func() bool { return dayCount(t, lim, key) == 0 && l.Size() == 0 })
	if o, err := store.Get(ctx, "lost"); err != nil || pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("the lost answer's order: %+v, %v; want FAILED NOT_SENT", o, err)
	}
}

// TestLedgerSetsAsideAFileThatDoesNotRead: a file of the ledger that does
// not read is renamed *.bad for a person to look at; the others are taken.
func TestLedgerSetsAsideAFileThatDoesNotRead(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "broken.json"), `{"v":1,"phase":"carry"`)
	writeFile(t, filepath.Join(dir, "future.json"), `{"v":2,"phase":"carry","holds":[{"key":"B:ALIPAY","member":"m"}]}`)
	l, err := pay.NewLedger(paytest.NewMemStore(), lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := filepath.Glob(filepath.Join(dir, "*.bad"))
	if l.Size() != 0 || len(bad) != 2 {
		t.Fatalf("%d entries, %d files set aside; want none taken and both set aside", l.Size(), len(bad))
	}
}

func mustAdmit(t *testing.T, lim *ratelimit.Limiter, key ratelimit.Key, member string) ratelimit.Hold {
	t.Helper()
	d, err := lim.Check(context.Background(), ratelimit.Request{Key: key, Member: member, Amount: 1, Currency: "CNY"})
	if err != nil || !d.Allowed {
		t.Fatalf("check %s: %+v, %v", member, d, err)
	}
	return d.Hold
}

func windowsJSON(h ratelimit.Hold) string {
	out := "["
	for i, w := range h.WindowNames() {
		if i > 0 {
			out += ","
		}
		out += `"` + w + `"`
	}
	return out + "]"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerAdmitsAgainOnceItsJournalIsWritable: a journal write fails
// (the ledger's directory is briefly not writable), so new payments are
// refused; once the disk is back and the entry is settled, payments are
// admitted again. A refusal that only a later successful write could lift
// would last forever, since refused payments write nothing.
func TestLedgerAdmitsAgainOnceItsJournalIsWritable(t *testing.T) {
	lim, store, d, winner := loserAndWinner(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := pay.NewLedger(store, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// The disk fails: the ledger's directory is not writable (a file stands in its place).
	if err := os.Remove(dir); err != nil { // NewLedger made it
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	loser := &pay.Order{OrderNo: "L1", RequestID: "dup", BizType: "B", Channel: "CA", Amount: 7, Currency: "CNY"}
	l.Settle(ctx, d.Hold, loser, winner)
	if l.Admitting() == nil {
		t.Fatal("expected a refusal while the journal cannot be written")
	}
	// The disk comes back; the watched slot is settled and forgotten.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	winner.Status, winner.ChannelTradeNo = pay.StatusSucceeded, "T1"
	if err := store.Finish(ctx, winner); err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, func() bool { return l.Size() == 0 })
	time.Sleep(200 * time.Millisecond)
	if err := l.Admitting(); err != nil {
		t.Fatalf("the ledger is empty and its disk writable, yet Admitting still refuses: %v", err)
	}
}
