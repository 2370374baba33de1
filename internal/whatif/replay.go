package whatif

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"payserver/internal/decisionlog"
	"payserver/internal/ratelimit"
)

// Source streams the decision log in order of instant, then id: never all
// in memory. repo.DecisionLog implements it.
type Source interface {
	Stream(ctx context.Context, f decisionlog.Filter, fn func(decisionlog.Entry) error) error
}

// Options is one replay.
type Options struct {
	// From and To bound the decisions reported, [From, To).
	From, To time.Time
	// Keys, when not empty, are the keys reported. Every key of their
	// channels is replayed all the same: they share its channel-wide
	// windows.
	Keys []ratelimit.Key
	// Proposed is the proposed document's Config.
	Proposed *ratelimit.Config
	// InForce are the documents decisions were taken under, by version
	// (Decision.LimitsVersion): the fidelity replay's rules. A decision
	// under a version not here is not checked.
	InForce map[string]*ratelimit.Config
	// MaxMerchants is how many merchants newly refused each key lists, the
	// most first. Default 10.
	MaxMerchants int
}

// maxDifferences bounds Result.Differences.
const maxDifferences = 20

// maxWarmUp bounds how long before From the replay starts, so that the
// windows hold what they held at From.
const maxWarmUp = 24 * time.Hour

// Replay streams the decisions of opts' interval (and, before From, those
// that still fill its windows at From, and the throttles whose learned
// limits are still in force at From: as far back as the longest sliding
// window or learned limit of every document involved, at most a day) from
// src through two models: one under opts.Proposed, one under the documents
// in force. Every entry is taken as recorded, in order: each decision of
// the same microsecond that was admitted before those that were not (a
// coalesced Redis call decides many at one instant), each release and
// give-back where it happened, and each throttle or reset of learned
// limits where the store took it, each model learning from the use of its
// own windows. A decision the store could not take (unavailable) is
// refused under the proposal too.
func Replay(ctx context.Context, src Source, opts Options) (Result, error) {
	if opts.Proposed == nil {
		return Result{}, errors.New("whatif: no proposed document")
	}
	if !opts.From.Before(opts.To) {
		return Result{}, errors.New("whatif: from must be before to")
	}
	if opts.MaxMerchants <= 0 {
		opts.MaxMerchants = 10
	}
	r := newReplayer(opts)
	start := opts.From.Add(-WarmUp(opts.Proposed, opts.InForce))
	var group []decisionlog.Entry
	flush := func() {
		slices.SortStableFunc(group, func(a, b decisionlog.Entry) int { return cmp.Compare(rank(a), rank(b)) })
		for _, e := range group {
			r.step(e)
		}
		group = group[:0]
	}
	err := src.Stream(ctx, decisionlog.Filter{From: start, To: opts.To, Keys: opts.Keys}, func(e decisionlog.Entry) error {
		if len(group) > 0 && !e.At.Equal(group[0].At) {
			flush()
		}
		group = append(group, e)
		return ctx.Err()
	})
	if err != nil {
		return Result{}, err
	}
	flush()
	return r.result(), nil
}

// rank orders the entries of one instant: admissions first.
func rank(e decisionlog.Entry) int {
	if e.Kind == decisionlog.KindDecision && e.Outcome.Admits() {
		return 0
	}
	return 1
}

type keyState struct {
	res       KeyResult
	minutes   map[int64]*Minute // by Unix minute
	merchants map[string]int64
}

type diffKey struct {
	key    string
	minute int64
}

type replayer struct {
	opts     Options
	report   map[ratelimit.Key]bool // nil: every key
	proposed *ratelimit.Model
	inForce  *ratelimit.Model
	keys     map[ratelimit.Key]*keyState
	checked  int64
	same     int64
	diffs    map[diffKey]*Difference
}

func newReplayer(opts Options) *replayer {
	r := &replayer{
		opts: opts, proposed: ratelimit.NewModel(), inForce: ratelimit.NewModel(),
		keys: map[ratelimit.Key]*keyState{}, diffs: map[diffKey]*Difference{},
	}
	if len(opts.Keys) > 0 {
		r.report = map[ratelimit.Key]bool{}
		for _, k := range opts.Keys {
			r.report[k] = true
		}
	}
	return r
}

// WarmUp is how long before its From a replay starts, so that at From its
// windows hold what they held then and it has seen every throttle whose
// learned limit is in force then, as well as what the window it learned
// from held: the longest sliding window plus the longest reach of a
// learned limit (Rule.LearnedReach) of every document involved, at most
// maxWarmUp.
func WarmUp(proposed *ratelimit.Config, inForce map[string]*ratelimit.Config) time.Duration {
	var window, reach time.Duration
	longest := func(c *ratelimit.Config) {
		for _, rule := range c.Rules {
			window, reach = max(window, rule.Longest()), max(reach, rule.LearnedReach())
		}
		for _, s := range c.Schedules {
			window, reach = max(window, s.Rule.Longest()), max(reach, s.Rule.LearnedReach())
		}
	}
	longest(proposed)
	for _, c := range inForce {
		longest(c)
	}
	return min(window+reach, maxWarmUp)
}

// admits reports whether cfg admits r at now in model m (recording it when
// so), with shadow rules admitting what they refuse.
func admits(m *ratelimit.Model, cfg *ratelimit.Config, req ratelimit.Request, now time.Time) bool {
	_, res := m.Decide(cfg, req, now)
	return res.Allowed || cfg.RuleAt(req.Key, now).Shadow
}

func (r *replayer) step(e decisionlog.Entry) {
	inForce, known := r.opts.InForce[e.Version]
	switch e.Kind {
	case decisionlog.KindRelease, decisionlog.KindGiveBack:
		give := e.Kind == decisionlog.KindGiveBack
		r.proposed.ReleaseKey(e.Key, e.Member, give)
		r.inForce.ReleaseKey(e.Key, e.Member, give)
		return
	case decisionlog.KindThrottle:
		// Each model learns from what it admitted, under its own rules.
		retryAfter := time.Duration(e.Amount) * time.Microsecond
		r.proposed.ThrottleKey(r.opts.Proposed, e.Key, e.Member, e.At, retryAfter)
		if known {
			r.inForce.ThrottleKey(inForce, e.Key, e.Member, e.At, retryAfter)
		}
		return
	case decisionlog.KindReset:
		r.proposed.ResetKeyLearned(r.opts.Proposed, e.Key)
		if known {
			r.inForce.ResetKeyLearned(inForce, e.Key)
		}
		return
	case decisionlog.KindDecision:
	default:
		return // a kind this build does not know changes no window
	}
	counted := !e.At.Before(r.opts.From) && (r.report == nil || r.report[e.Key])
	actual := e.Outcome.Admits()
	proposed := false
	req := ratelimit.Request{Key: e.Key, Member: e.Member, Amount: e.Amount, Currency: e.Currency, Merchant: e.Merchant}
	if e.Outcome != decisionlog.Unavailable {
		proposed = admits(r.proposed, r.opts.Proposed, req, e.At)
		if known && e.Source != ratelimit.SourceLocal && e.Source != ratelimit.SourceFailOpen {
			again := admits(r.inForce, inForce, req, e.At)
			if counted {
				r.check(e, actual, again)
			}
		}
	}
	if !counted {
		return
	}
	ks := r.keys[e.Key]
	if ks == nil {
		ks = &keyState{res: KeyResult{Key: e.Key.String()}, minutes: map[int64]*Minute{}, merchants: map[string]int64{}}
		r.keys[e.Key] = ks
	}
	ks.res.Offered++
	minute := e.At.Unix() / 60
	mi := ks.minutes[minute]
	if mi == nil {
		mi = &Minute{At: time.Unix(minute*60, 0).UTC()}
		ks.minutes[minute] = mi
	}
	mi.Offered++
	tally := func(c *Counts, admitted bool) {
		if admitted {
			c.Admitted++
		} else {
			c.Refused++
		}
	}
	tally(&ks.res.Actual, actual)
	tally(&ks.res.Proposed, proposed)
	if actual {
		mi.ActualAdmitted++
	}
	if proposed {
		mi.ProposedAdmitted++
	}
	switch {
	case actual && !proposed:
		ks.res.NewlyRefused++
		merchant := e.Merchant
		if merchant == "" {
			merchant = ratelimit.NoMerchant
		}
		ks.merchants[merchant]++
	case !actual && proposed:
		ks.res.NewlyAdmitted++
	}
}

// check counts one decision of the fidelity replay.
func (r *replayer) check(e decisionlog.Entry, recorded, again bool) {
	r.checked++
	if recorded == again {
		r.same++
		return
	}
	k := diffKey{e.Key.String(), e.At.Unix() / 60}
	d := r.diffs[k]
	if d == nil {
		d = &Difference{Key: k.key, Minute: time.Unix(k.minute*60, 0).UTC()}
		r.diffs[k] = d
	}
	if recorded {
		d.Admitted++
	} else {
		d.Refused++
	}
}

func (r *replayer) result() Result {
	res := Result{From: r.opts.From.UTC(), To: r.opts.To.UTC(), ProposedVersion: r.opts.Proposed.Version, Keys: []KeyResult{}, Fidelity: 1, Checked: r.checked}
	if r.checked > 0 {
		res.Fidelity = float64(r.same) / float64(r.checked)
	}
	for _, ks := range r.keys {
		kr := ks.res
		kr.Minutes = make([]Minute, 0, len(ks.minutes))
		for _, m := range ks.minutes {
			kr.Minutes = append(kr.Minutes, *m)
		}
		slices.SortFunc(kr.Minutes, func(a, b Minute) int { return a.At.Compare(b.At) })
		kr.Merchants = []Merchant{}
		for id, n := range ks.merchants {
			kr.Merchants = append(kr.Merchants, Merchant{MerchantID: id, NewlyRefused: n})
		}
		slices.SortFunc(kr.Merchants, func(a, b Merchant) int {
			return cmp.Or(cmp.Compare(b.NewlyRefused, a.NewlyRefused), cmp.Compare(a.MerchantID, b.MerchantID))
		})
		if len(kr.Merchants) > r.opts.MaxMerchants {
			kr.Merchants = kr.Merchants[:r.opts.MaxMerchants]
		}
		res.Keys = append(res.Keys, kr)
	}
	slices.SortFunc(res.Keys, func(a, b KeyResult) int { return cmp.Compare(a.Key, b.Key) })
	for _, d := range r.diffs {
		d.Why = why(*d)
		res.Differences = append(res.Differences, *d)
	}
	slices.SortFunc(res.Differences, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(b.Admitted+b.Refused, a.Admitted+a.Refused), cmp.Compare(a.Key, b.Key), a.Minute.Compare(b.Minute))
	})
	if len(res.Differences) > maxDifferences {
		res.Differences = res.Differences[:maxDifferences]
	}
	return res
}

// why says what most likely made the replay differ from the store.
func why(d Difference) string {
	switch {
	case d.Admitted > 0 && d.Refused == 0:
		return "the store admitted what the replay refused: its windows held less than the log has (releases not logged, entries dropped, or a limits change mid-window whose new document the log lacks)"
	case d.Refused > 0 && d.Admitted == 0:
		return "the store refused what the replay admitted: its windows held more than the log has (admissions before the replay's warm-up, other instances' entries dropped, a throttle the log lacks, or a closed key's schedule)"
	default:
		return "both ways in one minute: decisions of one instant in another order than the store took them, or a window's edge within the clocks' skew"
	}
}
