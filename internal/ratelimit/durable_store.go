package ratelimit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"payserver/internal/atomicfile"
)

// DurableStore is the Store of the embedded single-instance mode: the Model
// behind a mutex, on the wall clock (as Redis TIME is), with every change
// written to a journal file before it is answered, so that its windows
// survive a restart and a crash (kill -9) as a Redis with persistence
// would: an admission is appended and synced (fsync) before Check returns
// it; a release is appended without a sync (one lost to a crash leaves the
// slot held until its window passes, never the reverse); a throttle
// (learned limits) and a reset of learned limits are appended and synced,
// so that a restart keeps every learned limit it answered for.
//
// The journal is JSON lines: "check" records an admitted check (its windows,
// member, amount and time), replayed through the Model in order, which
// decides exactly as it did; "rel" records a release; "thr" a throttle and
// "rst" a reset of learned limits, replayed through the Model too; "put"
// records one member held in one window, and "lrn" one window's learned
// limit, as written by a compaction; a window is written as its fields,
// not as a name (WindowKey). Open replays the journal, then compacts it to the members still held (written to a
// temporary file, synced, renamed), and compacts again whenever that many
// records more have been appended.
//
// A DurableStore is for one process: the caller holds the data dir's lock.
type DurableStore struct {
	// lockedModel is the Model on the wall clock; its mutex guards the
	// journal's fields below too.
	lockedModel
	path string

	f       *os.File
	w       *bufio.Writer
	records int   // appended since the last compaction
	broken  error // a failed write: calls fail with it until recover succeeds
	// lastRecover is when recover last tried; closed is set by Close.
	lastRecover time.Time
	closed      bool
}

// compactEvery is how many records are appended between compactions.
const compactEvery = 100_000

// OpenDurableStore opens (or creates) the journal at path, replays it and
// compacts it. now is the clock; nil means time.Now.
func OpenDurableStore(path string, now func() time.Time) (*DurableStore, error) {
	s := &DurableStore{path: path}
	s.init(now, false)
	if err := s.replay(); err != nil {
		return nil, err
	}
	if err := s.compact(); err != nil {
		return nil, err
	}
	return s, nil
}

// journalWindow is a window as the journal writes it.
type journalWindow struct {
	Biz      string     `json:"b"`
	Channel  string     `json:"c"`
	Limit    int64      `json:"l"`
	Size     int64      `json:"s,omitempty"` // µs
	Amount   bool       `json:"a,omitempty"`
	Currency string     `json:"cur,omitempty"`
	Unit     string     `json:"u,omitempty"`
	Zone     string     `json:"z,omitempty"`
	Cutoff   int64      `json:"co,omitempty"` // minutes
	Track    Track      `json:"t,omitempty"`
	Reserved []Reserved `json:"r,omitempty"`
	Learn    *Learning  `json:"ln,omitempty"`
}

// journalRecord is one line of the journal.
type journalRecord struct {
	Op      string          `json:"op"` // check, rel, put, thr, rst, lrn
	Windows []journalWindow `json:"ws"`
	Member  string          `json:"m"`
	Amount  int64           `json:"am,omitempty"`
	// IfAmount makes a release (rel) one of the member's records for
	// Amount only (ReleaseIfAmount).
	IfAmount bool  `json:"ia,omitempty"`
	At       int64 `json:"at,omitempty"` // µs, wall clock
	Weight   int64 `json:"wt,omitempty"` // put
	// RetryAfter is a throttle's retry-after (thr), in µs.
	RetryAfter int64 `json:"ra,omitempty"`
	// Learned is a learned state {l, t, nb, e} (lrn).
	Learned *[4]int64 `json:"ls,omitempty"`
}

func toJournal(w KeyWindow) journalWindow {
	j := journalWindow{Biz: w.Key.BizType, Channel: w.Key.Channel, Limit: w.Limit, Size: w.Size.Microseconds(),
		Amount: w.Amount, Currency: w.Currency, Track: w.Track, Reserved: w.Reserved}
	if w.Learn.On() {
		learn := w.Learn
		j.Learn = &learn
	}
	if w.IsCalendar() {
		j.Unit, j.Zone, j.Cutoff = string(w.Calendar.Unit), w.Calendar.Zone.String(), int64(w.Calendar.Cutoff/time.Minute)
	}
	return j
}

// fromJournal rebuilds a window; zones caches the zones loaded so far.
func fromJournal(j journalWindow, zones map[string]*time.Location) (KeyWindow, error) {
	w := KeyWindow{Key: Key{BizType: j.Biz, Channel: j.Channel}, Track: j.Track, Reserved: j.Reserved}
	if j.Learn != nil {
		w.Learn = *j.Learn
	}
	w.Limit, w.Size, w.Amount, w.Currency = j.Limit, time.Duration(j.Size)*time.Microsecond, j.Amount, j.Currency
	if j.Unit != "" {
		zone := zones[j.Zone]
		if zone == nil {
			var err error
			if zone, err = time.LoadLocation(j.Zone); err != nil {
				return w, fmt.Errorf("zone %q: %w", j.Zone, err)
			}
			zones[j.Zone] = zone
		}
		w.Calendar = Calendar{Unit: CalendarUnit(j.Unit), Zone: zone, Cutoff: time.Duration(j.Cutoff) * time.Minute}
	}
	return w, nil
}

func toJournalAll(ws []KeyWindow) []journalWindow {
	out := make([]journalWindow, len(ws))
	for i, w := range ws {
		out[i] = toJournal(w)
	}
	return out
}

// replay applies the journal at s.path, if any, to the model. A last line
// cut short by a crash is ignored: it was never answered.
func (s *DurableStore) replay() error {
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ratelimit: open the limiter journal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	zones := map[string]*time.Location{}
	for line := 1; ; line++ {
		data, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // a partial last line was never synced or answered
		}
		if err != nil {
			return fmt.Errorf("ratelimit: read the limiter journal %s: %w", s.path, err)
		}
		var rec journalRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("ratelimit: limiter journal %s line %d: %w", s.path, line, err)
		}
		ws := make([]KeyWindow, len(rec.Windows))
		for i, j := range rec.Windows {
			if ws[i], err = fromJournal(j, zones); err != nil {
				return fmt.Errorf("ratelimit: limiter journal %s line %d: %w", s.path, line, err)
			}
		}
		at := time.UnixMicro(rec.At)
		switch rec.Op {
		case "check":
			s.model.Check(ws, rec.Member, rec.Amount, at)
		case "rel":
			if rec.IfAmount {
				s.model.ReleaseIfAmount(ws, rec.Member, rec.Amount)
			} else {
				s.model.Release(ws, rec.Member)
			}
		case "put":
			if len(ws) == 1 {
				s.model.put(ws[0], rec.Member, rec.Weight, rec.Amount, at)
			}
		case "thr":
			s.model.Throttle(ws, at, time.Duration(rec.RetryAfter)*time.Microsecond)
		case "rst":
			s.model.ResetLearned(ws)
		case "lrn":
			if len(ws) == 1 && rec.Learned != nil {
				l := rec.Learned
				s.model.putLearned(ws[0], learnedState{l: l[0], t: l[1], nb: l[2], e: l[3]})
			}
		default:
			return fmt.Errorf("ratelimit: limiter journal %s line %d: unknown op %q", s.path, line, rec.Op)
		}
	}
}

// compact rewrites the journal as the members the model holds now, and
// opens it for appending. s.mu must be held, or s not yet shared.
func (s *DurableStore) compact() error {
	if s.f != nil {
		if err := s.w.Flush(); err != nil {
			return err
		}
		_ = s.f.Close()
		s.f = nil
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("ratelimit: compact the limiter journal: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	enc := json.NewEncoder(w)
	var werr error
	s.model.holdings(s.clock(), func(kw KeyWindow, member string, weight, amount, at int64) {
		if werr == nil {
			werr = enc.Encode(journalRecord{Op: "put", Windows: []journalWindow{toJournal(kw)}, Member: member, Amount: amount, At: at, Weight: weight})
		}
	})
	s.model.eachLearned(func(kw KeyWindow, st learnedState) {
		if werr == nil {
			werr = enc.Encode(journalRecord{Op: "lrn", Windows: []journalWindow{toJournal(kw)}, Learned: &[4]int64{st.l, st.t, st.nb, st.e}})
		}
	})
	if werr == nil {
		werr = w.Flush()
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, s.path)
	}
	if werr == nil {
		werr = atomicfile.SyncDir(filepath.Dir(s.path))
	}
	if werr != nil {
		return fmt.Errorf("ratelimit: compact the limiter journal: %w", werr)
	}
	s.f, err = os.OpenFile(s.path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("ratelimit: open the limiter journal: %w", err)
	}
	s.w, s.records = bufio.NewWriterSize(s.f, 1<<12), 0
	return nil
}

// append writes rec, synced when sync is set. s.mu must be held.
func (s *DurableStore) append(rec journalRecord, sync bool) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := s.w.Write(append(data, '\n')); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	if sync {
		if err := s.f.Sync(); err != nil {
			return err
		}
	}
	if s.records++; s.records >= compactEvery {
		// The record is written (and synced when asked): a compaction that
		// fails leaves the store broken for later calls (recover retries).
		if err := s.compact(); err != nil {
			s.broken = fmt.Errorf("ratelimit: the limiter journal %s failed: %w", s.path, err)
		}
	}
	return nil
}

// recover tries, at most once a second, to make a broken store durable
// again by rewriting its journal from the model (which holds every
// admission, those whose write failed included). s.mu must be held.
func (s *DurableStore) recover() error {
	if s.broken == nil || s.closed {
		return s.broken
	}
	if now := time.Now(); now.Sub(s.lastRecover) < time.Second {
		return s.broken
	} else {
		s.lastRecover = now
	}
	if err := s.compact(); err != nil {
		return s.broken
	}
	s.broken = nil
	return nil
}

// Check implements Store: the Model decides; an admission is journaled and
// synced before it is answered. StoreResult.At is the store's clock, as
// Model.Check gives it: for a member already held, the time a sliding
// window recorded it at, which the journal keeps across restarts.
func (s *DurableStore) Check(_ context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.recover(); err != nil {
		return StoreResult{}, err
	}
	now := s.clock()
	res := s.model.Check(windows, member, amount, now)
	if res.Allowed {
		if err := s.append(journalRecord{Op: "check", Windows: toJournalAll(windows), Member: member, Amount: amount, At: micros(now)}, true); err != nil {
			// The admission stays counted in memory; it is not answered.
			s.broken = fmt.Errorf("ratelimit: the limiter journal %s failed: %w", s.path, err)
			return StoreResult{}, s.broken
		}
	}
	return res, nil
}

// Release implements Store.
func (s *DurableStore) Release(_ context.Context, windows []KeyWindow, member string) (bool, error) {
	return s.release(journalRecord{Op: "rel", Windows: toJournalAll(windows), Member: member}, func() bool {
		return s.model.Release(windows, member)
	})
}

// ReleaseIfAmount implements Store.
func (s *DurableStore) ReleaseIfAmount(_ context.Context, windows []KeyWindow, member string, amount int64) (bool, error) {
	return s.release(journalRecord{Op: "rel", Windows: toJournalAll(windows), Member: member, Amount: amount, IfAmount: true}, func() bool {
		return s.model.ReleaseIfAmount(windows, member, amount)
	})
}

// release applies a release to the model and journals rec when it found
// the member.
func (s *DurableStore) release(rec journalRecord, apply func() bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.recover(); err != nil {
		return false, err
	}
	found := apply()
	if !found {
		return false, nil // nothing changed: nothing to journal
	}
	if err := s.append(rec, false); err != nil {
		s.broken = fmt.Errorf("ratelimit: the limiter journal %s failed: %w", s.path, err)
		return false, s.broken
	}
	return found, nil
}

// Ping implements Store: nil while the journal can be written.
func (s *DurableStore) Ping(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recover()
}

// Close flushes and closes the journal.
func (s *DurableStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f, s.closed = nil, true
	s.broken = errors.New("ratelimit: the limiter store is closed")
	return err
}

// Throttle implements Learner: the Model learns, and the throttle is
// journaled and synced before it returns.
func (s *DurableStore) Throttle(_ context.Context, windows []KeyWindow, retryAfter time.Duration) error {
	return s.learnedChange(journalRecord{Op: "thr", Windows: toJournalAll(windows), RetryAfter: retryAfter.Microseconds()}, func(now time.Time) {
		s.model.Throttle(windows, now, time.Duration(retryAfter.Microseconds())*time.Microsecond)
	})
}

// ResetLearned implements Learner, journaled and synced as Throttle.
func (s *DurableStore) ResetLearned(_ context.Context, windows []KeyWindow) error {
	return s.learnedChange(journalRecord{Op: "rst", Windows: toJournalAll(windows)}, func(time.Time) { s.model.ResetLearned(windows) })
}

// learnedChange applies change to the model at the store's time and
// journals rec (its At set to that time), synced.
func (s *DurableStore) learnedChange(rec journalRecord, change func(now time.Time)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.recover(); err != nil {
		return err
	}
	now := s.clock()
	change(now)
	rec.At = micros(now)
	if err := s.append(rec, true); err != nil {
		s.broken = fmt.Errorf("ratelimit: the limiter journal %s failed: %w", s.path, err)
		return s.broken
	}
	return nil
}
