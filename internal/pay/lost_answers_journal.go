package pay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"payserver/internal/atomicfile"
	"payserver/internal/ratelimit"
)

// The lost answers waiting for their grace are kept in a directory
// (LostAnswersOptions.Dir), one file each, so that a restart of the
// instance does not forget them: a forgotten one leaves its slot held by
// nobody until its window passes (a day, for a calendar window; the chaos
// campaign found it, seed 13). A file is written when the answer is
// queued and removed once it is settled; Run queues every file it finds at
// its start, with its original time.

// journaledAnswer is a lost answer as its file holds it.
type journaledAnswer struct {
	RequestID  string          `json:"requestId"`
	BizType    string          `json:"bizType"`
	Channel    string          `json:"channel,omitempty"`
	MerchantID string          `json:"merchantId"`
	Amount     int64           `json:"amount"`
	Currency   string          `json:"currency"`
	Subject    string          `json:"subject,omitempty"`
	Holds      []journaledHold `json:"holds"`
	AtUs       int64           `json:"atUs"`
}

type journaledHold struct {
	Key     string   `json:"key"`
	Member  string   `json:"member"`
	Windows []string `json:"windows,omitempty"`
	// InProcess and OwnKey keep where the hold is released from
	// (ratelimit.Hold.InProcess, OwnKey): read back without them, a
	// narrowed release would take records that are not its own.
	InProcess bool  `json:"inProcess,omitempty"`
	OwnKey    bool  `json:"ownKey,omitempty"`
	OwnRecord bool  `json:"ownRecord,omitempty"`
	Amount    int64 `json:"amount,omitempty"`
}

// journalHold is h as a file keeps it: its key, member, the windows that
// hold it and where it is released from.
func journalHold(h ratelimit.Hold) journaledHold {
	return journaledHold{Key: h.Key.String(), Member: h.Member, Windows: h.WindowNames(), InProcess: h.InProcess(), OwnKey: h.IsOwnKey(),
		OwnRecord: h.IsOwnRecord(), Amount: h.Amount()}
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
	h = h.WithAmount(jh.Amount)
	if jh.OwnRecord {
		h = h.OwnRecord()
	}
	return h, err
}

// path is the file of a lost answer of requestID.
func (l *LostAnswers) path(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return filepath.Join(l.opts.Dir, hex.EncodeToString(sum[:16])+".json")
}

// keep writes a's file; a failure is logged, and a is kept in memory only.
func (l *LostAnswers) keep(a lostAnswer) {
	if l.opts.Dir == "" {
		return
	}
	j := journaledAnswer{RequestID: a.req.RequestID, BizType: a.req.BizType, Channel: a.req.Channel, MerchantID: a.req.MerchantID,
		Amount: a.req.Amount, Currency: a.req.Currency, Subject: a.req.Subject, AtUs: a.at.UnixMicro()}
	for _, h := range a.holds {
		j.Holds = append(j.Holds, journalHold(h))
	}
	err := writeFileAtomic(l.path(a.req.RequestID), j)
	if err != nil {
		l.opts.Logger.Warn("a lost answer could not be kept on disk; a restart before its grace forgets it", "requestId", a.req.RequestID, "err", err)
	}
}

// forget removes a's file once it is settled (or given up).
func (l *LostAnswers) forget(a lostAnswer) {
	if l.opts.Dir != "" {
		if err := atomicfile.Remove(l.path(a.req.RequestID)); err != nil {
			l.opts.Logger.Warn("a settled lost answer's file could not be removed", "requestId", a.req.RequestID, "err", err)
		}
	}
}

// recover queues the lost answers kept by an earlier run, oldest first; a
// file that does not read is logged and left for a person to look at.
func (l *LostAnswers) recover() {
	if l.opts.Dir == "" {
		return
	}
	entries, err := os.ReadDir(l.opts.Dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.opts.Logger.Warn("the kept lost answers could not be read", "dir", l.opts.Dir, "err", err)
		}
		return
	}
	var found []lostAnswer
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		a, err := readAnswer(filepath.Join(l.opts.Dir, e.Name()))
		if err != nil {
			l.opts.Logger.Warn("a kept lost answer does not read; left in place", "file", e.Name(), "err", err)
			continue
		}
		found = append(found, a)
	}
	for _, a := range sortedByTime(found) {
		select {
		case l.queue <- a:
		default:
			return // the rest wait for the next start
		}
	}
	if len(found) > 0 {
		l.opts.Logger.Info("lost answers kept by an earlier run are settled again", "count", len(found))
	}
}

func readAnswer(path string) (lostAnswer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return lostAnswer{}, err
	}
	var j journaledAnswer
	if err := json.Unmarshal(data, &j); err != nil {
		return lostAnswer{}, err
	}
	a := lostAnswer{at: time.UnixMicro(j.AtUs), req: PayRequest{RequestID: j.RequestID, BizType: j.BizType, Channel: j.Channel,
		MerchantID: j.MerchantID, Amount: j.Amount, Currency: j.Currency, Subject: j.Subject}}
	for _, jh := range j.Holds {
		h, err := jh.hold()
		if err != nil {
			return lostAnswer{}, err
		}
		a.holds = append(a.holds, h)
	}
	return a, nil
}

func sortedByTime(as []lostAnswer) []lostAnswer {
	for i := 1; i < len(as); i++ {
		for k := i; k > 0 && as[k].at.Before(as[k-1].at); k-- {
			as[k], as[k-1] = as[k-1], as[k]
		}
	}
	return as
}

// writeFileAtomic writes v as JSON to path through atomicfile: the file
// and its directory are fsynced before it returns.
func writeFileAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
