package pay

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"payserver/internal/atomicfile"
	"payserver/internal/ratelimit"
)

// The ledger's journal is its directory (LedgerOptions.Dir): one file per
// entry, named by its id, in one format (journaledEntry), written through
// atomicfile (the file, then its directory, fsynced) before the call that
// handed the entry over returns, rewritten when the entry moves from
// watching to carrying out, and removed (the directory fsynced) once its
// fate is carried out. NewLedger takes every file it finds, with its
// original time; a file that does not read is renamed *.bad, logged, and
// left for a person to look at.

// journalVersion is the format's version: a file of another version is
// not read (renamed *.bad).
const journalVersion = 1

// journaledEntry is an entry as its file holds it.
type journaledEntry struct {
	Version     int             `json:"v"`
	Phase       string          `json:"phase"`
	AtUs        int64           `json:"atUs"`
	Order       *journaledOrder `json:"order,omitempty"`
	Why         string          `json:"why,omitempty"`
	Holds       []journaledHold `json:"holds"`
	AmountsOnly bool            `json:"amountsOnly,omitempty"`
	// NotBeforeUs is the end of a lost acquire's grace (Unix µs).
	NotBeforeUs int64 `json:"notBeforeUs,omitempty"`
}

// journaledOrder is what an entry keeps of a payment (paymentOf).
type journaledOrder struct {
	OrderNo     string `json:"orderNo"`
	RequestID   string `json:"requestId"`
	RequestHash string `json:"requestHash,omitempty"`
	BizType     string `json:"bizType"`
	Channel     string `json:"channel,omitempty"`
	MerchantID  string `json:"merchantId,omitempty"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Subject     string `json:"subject,omitempty"`
}

type journaledHold struct {
	Key     string   `json:"key"`
	Member  string   `json:"member"`
	Windows []string `json:"windows,omitempty"`
	// InProcess, OwnKey and OwnRecord keep where the hold is released
	// from (ratelimit.Hold): read back without them, a narrowed release
	// would take records that are not its own.
	InProcess bool  `json:"inProcess,omitempty"`
	OwnKey    bool  `json:"ownKey,omitempty"`
	OwnRecord bool  `json:"ownRecord,omitempty"`
	Amount    int64 `json:"amount,omitempty"`
	// Merchant is the merchant the member was checked for
	// (ratelimit.Hold.OfMerchant).
	Merchant string `json:"merchant,omitempty"`
}

// journalHold is h as a file keeps it: its key, member, the windows that
// hold it and where it is released from.
func journalHold(h ratelimit.Hold) journaledHold {
	return journaledHold{Key: h.Key.String(), Member: h.Member, Windows: h.WindowNames(), InProcess: h.InProcess(), OwnKey: h.IsOwnKey(),
		OwnRecord: h.IsOwnRecord(), Amount: h.Amount(), Merchant: h.Merchant()}
}

// hold is the Hold jh keeps.
func (jh journaledHold) hold() (ratelimit.Hold, error) {
	key, err := ratelimit.ParseKey(jh.Key)
	if err != nil {
		return ratelimit.Hold{}, err
	}
	h, err := ratelimit.HoldFromWindowKeys(key, jh.Member, jh.Windows)
	if jh.InProcess {
		h = h.InProcessOnly()
	}
	if jh.OwnKey {
		h = h.OwnKey()
	}
	h = h.WithAmount(jh.Amount).OfMerchant(jh.Merchant)
	if jh.OwnRecord {
		h = h.OwnRecord()
	}
	return h, err
}

func journalOrder(o *Order) *journaledOrder {
	if o == nil {
		return nil
	}
	return &journaledOrder{OrderNo: o.OrderNo, RequestID: o.RequestID, RequestHash: o.RequestHash, BizType: o.BizType,
		Channel: o.Channel, MerchantID: o.MerchantID, Amount: o.Amount, Currency: o.Currency, Subject: o.Subject}
}

func (jo *journaledOrder) order() *Order {
	if jo == nil {
		return nil
	}
	return &Order{OrderNo: jo.OrderNo, RequestID: jo.RequestID, RequestHash: jo.RequestHash, BizType: jo.BizType,
		Channel: jo.Channel, MerchantID: jo.MerchantID, Amount: jo.Amount, Currency: jo.Currency, Subject: jo.Subject}
}

// acquireID names a lost acquire: one per member and key, so that
// AcquiredAgain finds it and a member lost twice is kept once.
func acquireID(key ratelimit.Key, member string) string {
	sum := sha256.Sum256([]byte("acquire\x00" + key.String() + "\x00" + member))
	return hex.EncodeToString(sum[:16])
}

// newEntryID names a new close or watch entry.
func newEntryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// carryID names a fate to carry out: one per slot, kind and place, so that
// the same release handed over twice is kept once. A whole release and an
// amounts-only one of the same slot are kept apart and each made: made in
// either order they leave what they would have left made at once.
func carryID(h ratelimit.Hold, amountsOnly bool) string {
	kind := "all"
	if amountsOnly {
		kind = "amounts"
	}
	if h.InProcess() {
		kind += "+in-process"
	}
	if h.IsOwnKey() {
		kind += "+own-key"
	}
	if h.IsOwnRecord() {
		kind += "+own-record"
	}
	sum := sha256.Sum256([]byte(h.Key.String() + "\x00" + h.Member + "\x00" + kind))
	return hex.EncodeToString(sum[:16])
}

func (l *Ledger) path(id string) string { return filepath.Join(l.opts.Dir, id+".json") }

// journal writes e's file; l.mu is held. A failure is logged, e is kept in
// memory, marked unwritten and written again on each pass (putBack), and
// new payments are refused (Admitting) while any entry is unwritten.
func (l *Ledger) journal(e *entry) {
	if l.opts.Dir == "" {
		return
	}
	j := journaledEntry{Version: journalVersion, Phase: e.phase.String(), AtUs: e.at.UnixMicro(), Order: journalOrder(e.order),
		Why: e.why, AmountsOnly: e.amountsOnly}
	if e.phase == phaseAcquire {
		j.NotBeforeUs = e.notBefore.UnixMicro()
	}
	for _, h := range e.holds {
		j.Holds = append(j.Holds, journalHold(h))
	}
	data, err := json.Marshal(j)
	if err == nil {
		err = atomicfile.Write(l.path(e.id), data, 0o600)
	}
	if err != nil {
		if !e.unwritten {
			e.unwritten = true
			l.countUnwritten(1)
			l.opts.Logger.Error("a ledger entry could not be written to disk; a restart forgets it, and payments are refused until the ledger can write",
				"requestId", e.member(), "phase", e.phase.String(), "err", err)
		}
		return
	}
	if e.unwritten {
		e.unwritten = false
		l.countUnwritten(-1)
	}
}

// countUnwritten adds d to the entries whose file is not written; l.mu is
// held.
func (l *Ledger) countUnwritten(d int) {
	l.unwritten += d
	l.unjournaled.Store(l.unwritten > 0)
}

// rewriteUnwritten writes the files of the unwritten entries again, at
// most once a second: Admitting calls it while payments are refused for
// them, so that a disk that came back admits payments again without
// waiting for the entries' turns.
func (l *Ledger) rewriteUnwritten() {
	now := l.opts.Now().UnixMicro()
	last := l.lastRewrite.Load()
	if now-last < time.Second.Microseconds() || !l.lastRewrite.CompareAndSwap(last, now) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if e.unwritten {
			l.journal(e)
		}
	}
}

// unjournal removes e's file; l.mu is held.
func (l *Ledger) unjournal(e *entry) {
	if l.opts.Dir == "" {
		return
	}
	if err := atomicfile.Remove(l.path(e.id)); err != nil {
		l.opts.Logger.Warn("a settled ledger entry's file could not be removed; the next run settles it again (idempotent)",
			"requestId", e.member(), "err", err)
	}
}

// recover takes the entries an earlier run kept in Dir, then those of the
// earlier formats in Migrate (kept in Dir, then their files removed). A
// directory that exists but cannot be read is an error: starting without
// its entries would leave their slots held by nobody.
func (l *Ledger) recover() error {
	if l.opts.Dir == "" {
		return nil
	}
	names, err := jsonFiles(l.opts.Dir)
	if err != nil {
		return fmt.Errorf("pay: the ledger in %s cannot be read: %w", l.opts.Dir, err)
	}
	// Made now, not at the first entry: admissions in flight are written
	// into it from the first payment on (ledger_inflight.go).
	if err := os.MkdirAll(l.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("pay: the ledger's directory %s cannot be made: %w", l.opts.Dir, err)
	}
	if err := l.recoverInFlight(); err != nil {
		return err
	}
	var found []*entry
	for _, name := range names {
		e, err := readEntry(filepath.Join(l.opts.Dir, name))
		if err != nil {
			l.setAside(l.opts.Dir, name, err)
			continue
		}
		e.id = strings.TrimSuffix(name, ".json")
		found = append(found, e)
	}
	for _, e := range found {
		l.restore(e)
	}
	if len(found) > 0 {
		l.opts.Logger.Info("ledger entries kept by an earlier run are settled again", "count", len(found))
	}
	for _, dir := range l.opts.Migrate {
		if err := l.migrate(dir); err != nil {
			return err
		}
	}
	return nil
}

// restore takes e, read back, due at once (a lost acquire: at the end of
// its grace).
func (l *Ledger) restore(e *entry) {
	e.backoff = workBackoff
	e.due = e.dueFrom(l.opts.Now())
	if e.phase == phaseClose && e.order != nil && e.why == "" {
		e.why = notSentLost
	}
	l.mu.Lock()
	l.seq++
	e.seq = l.seq
	if _, ok := l.entries[e.id]; !ok {
		l.entries[e.id] = e
		l.size.Add(1)
	}
	l.mu.Unlock()
}

func readEntry(path string) (*entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return entryOf(data)
}

// entryOf reads an entry as journal wrote it.
func entryOf(data []byte) (*entry, error) {
	var j journaledEntry
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, err
	}
	if j.Version != journalVersion {
		return nil, fmt.Errorf("format version %d, this payserver reads %d", j.Version, journalVersion)
	}
	e := &entry{at: time.UnixMicro(j.AtUs), order: j.Order.order(), why: j.Why, amountsOnly: j.AmountsOnly}
	switch j.Phase {
	case "close":
		e.phase = phaseClose
	case "watch":
		e.phase = phaseWatch
	case "carry":
		e.phase = phaseCarry
	case "acquire":
		e.phase, e.notBefore = phaseAcquire, time.UnixMicro(j.NotBeforeUs)
	default:
		return nil, fmt.Errorf("unknown phase %q", j.Phase)
	}
	var err error
	if e.holds, err = holdsOf(j.Holds); err != nil {
		return nil, err
	}
	if len(e.holds) == 0 || (e.phase == phaseClose || e.phase == phaseWatch) && e.order == nil {
		return nil, errors.New("an entry without its slot or its payment")
	}
	return e, nil
}

// legacyFile is a file of an earlier format: a lost answer (requestId,
// holds) or an owed release (hold).
type legacyFile struct {
	RequestID   string          `json:"requestId"`
	BizType     string          `json:"bizType"`
	Channel     string          `json:"channel,omitempty"`
	MerchantID  string          `json:"merchantId"`
	Amount      int64           `json:"amount"`
	Currency    string          `json:"currency"`
	Subject     string          `json:"subject,omitempty"`
	Holds       []journaledHold `json:"holds"`
	Hold        *journaledHold  `json:"hold"`
	AmountsOnly bool            `json:"amountsOnly,omitempty"`
	AtUs        int64           `json:"atUs"`
}

// migrate takes the files of an earlier format in dir as entries, keeps
// them in Dir, and removes them; dir goes when it is left empty.
func (l *Ledger) migrate(dir string) error {
	names, err := jsonFiles(dir)
	if err != nil {
		return fmt.Errorf("pay: the earlier slot files in %s cannot be read: %w", dir, err)
	}
	n := 0
	for _, name := range names {
		e, err := readLegacy(filepath.Join(dir, name))
		if err != nil {
			l.setAside(dir, name, err)
			continue
		}
		e.id = newEntryID()
		if e.phase == phaseCarry {
			e.id = carryID(e.holds[0], e.amountsOnly)
		}
		l.mu.Lock()
		l.journal(e)
		l.mu.Unlock()
		if l.unjournaled.Load() {
			return fmt.Errorf("pay: the earlier slot file %s could not be kept in the ledger %s", filepath.Join(dir, name), l.opts.Dir)
		}
		l.restore(e)
		if err := atomicfile.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("pay: a migrated slot file could not be removed: %w", err)
		}
		n++
	}
	if n > 0 {
		l.opts.Logger.Info("slot files of an earlier version were moved into the ledger", "dir", dir, "count", n, "ledger", l.opts.Dir)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.opts.Logger.Info("an earlier version's slot directory was left in place (not empty)", "dir", dir)
	}
	return nil
}

func readLegacy(path string) (*entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j legacyFile
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, err
	}
	e := &entry{at: time.UnixMicro(j.AtUs)}
	if j.Hold != nil {
		h, err := j.Hold.hold()
		if err != nil {
			return nil, err
		}
		e.phase, e.holds, e.amountsOnly = phaseCarry, []ratelimit.Hold{h}, j.AmountsOnly
		return e, nil
	}
	if j.RequestID == "" || len(j.Holds) == 0 {
		return nil, errors.New("neither a lost answer nor an owed release")
	}
	req := PayRequest{RequestID: j.RequestID, BizType: j.BizType, Channel: j.Channel, MerchantID: j.MerchantID,
		Amount: j.Amount, Currency: j.Currency, Subject: j.Subject}
	e.phase, e.why = phaseClose, notSentLost
	e.order = &Order{OrderNo: newOrderNo(e.at.UTC()), RequestID: req.RequestID, RequestHash: req.Hash(), BizType: req.BizType,
		Channel: req.Channel, MerchantID: req.MerchantID, Amount: req.Amount, Currency: req.Currency, Subject: req.Subject}
	if e.holds, err = holdsOf(j.Holds); err != nil {
		return nil, err
	}
	if e.order.Channel == "" {
		e.order.Channel = e.holds[0].Key.Channel
	}
	return e, nil
}

// holdsOf is the holds js keep.
func holdsOf(js []journaledHold) ([]ratelimit.Hold, error) {
	out := make([]ratelimit.Hold, 0, len(js))
	for _, jh := range js {
		h, err := jh.hold()
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// jsonFiles lists dir's *.json files by name; a missing dir has none.
func jsonFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// setAside renames a file that does not read to *.bad, so that it is not
// read again and a person can look at it.
func (l *Ledger) setAside(dir, name string, why error) {
	from := filepath.Join(dir, name)
	to := from + ".bad"
	if err := os.Rename(from, to); err != nil {
		to = from
	} else if err := atomicfile.SyncDir(dir); err != nil {
		l.opts.Logger.Warn("a renamed ledger file's directory could not be synced", "dir", dir, "err", err)
	}
	l.opts.Logger.Error("a ledger file does not read; set aside for a person to look at, its slot frees itself when its window passes",
		"file", to, "err", why)
}
