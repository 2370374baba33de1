package ratelimit

import "time"

// Learned limits, as the Model writes them (every store follows, the Redis
// store's check and learn scripts too: redisstore). All arithmetic is on
// integers: times in µs, fractions in millionths, divisions rounded down.
//
// A learning window w (KeyWindow.Learns: a sliding count window of size S
// and configured limit C, with Learning {Step, Decrease, Floor}) may hold a
// learned state {l, t, nb, e}: the learned value l set at the last
// throttle t, a not-before nb and an end e.
//
//   - In force at now iff now < e. Its value at now is
//     v(now) = l + ⌊(now − t) / S⌋ × Step: it climbs by Step per whole
//     window since the last throttle (no writes: a function of the time).
//   - The effective limit of w at now is 0 while now < nb (the channel's
//     retry-after: nothing is admitted), else min(C, v(now)); C when no
//     state is in force. It replaces C in every rule of Check: a member is
//     admitted by w iff w holds it already or use + 1 ≤ effective − unmet
//     reservations (shrunk to the effective limit, model.go); the binding window of an admission is the one with the
//     least effective room. A window binds by a learned limit when its
//     effective limit is below C (StoreResult.Limits, Decision.Learned).
//   - The retry-after of a refusal by w is the time until a member leaves
//     so that use + 1 ≤ min(C, v(now)) − unmet (w's wait as for any
//     sliding window, with that limit; 0 when it fits already), and at
//     least nb − now. It is conservative where the value would climb past
//     the use before enough members leave: it never says to come back
//     before w admits, since v only climbs and the use only falls while
//     nothing is admitted.
//   - Throttle at now with retry-after r: with u the use of w at now (its
//     members in (now − S, now]) and v(now) the value of a state in force,
//     l' = max(Floor, min(v(now), ⌊u × Decrease / million⌋)) (no v: the
//     second term alone). So a throttle never raises a learned limit, a
//     storm of throttles does not compound (each takes a fraction of what
//     the window admitted, which the learned limit itself bounds), and the
//     limit never drops below Floor (by default at least the number of
//     names a window with reservations holds them for, Rule.learning). nb' = max(now + r, nb of the state).
//     If l' ≥ C and nb' ≤ now, the state is removed (nothing to learn);
//     else it becomes {l', now, nb', e'} with
//     e' = max(nb', now + ⌈(C − l') / Step⌉ × S) (only nb' when l' ≥ C):
//     the time the value reaches the configured limit in force at the
//     throttle. A later limits change applies through min(C, v) until e';
//     a raised limit does not prolong it.
//   - A state not in force is removed by the next check or throttle of its
//     window (now ≥ e: invisible, since it never comes back). Redis gives
//     its key a TTL to e plus a margin.
//   - A member already held passes w whatever its learned limit, as it
//     passes a full window.

// learnedState is one window's learned limit: value l at the last throttle
// t, not-before nb and end e, in µs.
type learnedState struct{ l, t, nb, e int64 }

// value is the learned value of st at now (≥ st.t), for window w.
func (st learnedState) value(w KeyWindow, now int64) int64 {
	return st.l + max(now-st.t, 0)/w.Size.Microseconds()*w.Learn.Step
}

// effective is the limit window w applies at now under state st (in force
// when ok): the limit now (0 before nb), the limit once nb has passed
// (min(C, v(now))), and nb.
func effective(w KeyWindow, st learnedState, ok bool, now int64) (limit, after, notBefore int64) {
	if !ok || now >= st.e {
		return w.Limit, w.Limit, 0
	}
	after = min(w.Limit, st.value(w, now))
	if now < st.nb {
		return 0, after, st.nb
	}
	return after, after, st.nb
}

// throttled is the state a throttle at now with retry-after r (µs) leaves
// on window w, whose use is use, after state st (in force when ok); keep
// is false when no state is left.
func throttled(w KeyWindow, st learnedState, ok bool, use, now, r int64) (next learnedState, keep bool) {
	if ok && now >= st.e {
		ok = false
	}
	l := use * w.Learn.Decrease / million
	nb := now + max(r, 0)
	if ok {
		l = min(l, st.value(w, now))
		nb = max(nb, st.nb)
	}
	l = max(l, w.Learn.Floor)
	if l >= w.Limit && nb <= now {
		return learnedState{}, false
	}
	e := nb
	if l < w.Limit {
		e = max(e, now+(w.Limit-l+w.Learn.Step-1)/w.Learn.Step*w.Size.Microseconds())
	}
	return learnedState{l: l, t: now, nb: nb, e: e}, true
}

// ReportLearned is what Learner.Learned reports of window w at now (µs)
// for the learned state {l, t, nb, e} a store keeps of it (above): a
// store that keeps the state outside this package reports it so.
func ReportLearned(w KeyWindow, l, t, nb, e, now int64) LearnedLimit {
	return learnedLimit(w, learnedState{l: l, t: t, nb: nb, e: e}, now)
}

// learnedLimit reports state st of window w at now (µs) for Learned.
func learnedLimit(w KeyWindow, st learnedState, now int64) LearnedLimit {
	limit, _, nb := effective(w, st, true, now)
	out := LearnedLimit{Key: w.Key, Window: w.Window, Limit: limit, Learned: st.value(w, now), Since: time.UnixMicro(st.t), Until: time.UnixMicro(st.e)}
	if nb > now {
		out.NotBefore = time.UnixMicro(nb)
	}
	return out
}

// learnedAt returns the state of learning window w in force at now,
// removing one that ended.
func (m *Model) learnedAt(w KeyWindow, now int64) (learnedState, bool) {
	id := idOf(w)
	st, ok := m.learned[id]
	if ok && now >= st.e {
		delete(m.learned, id)
		return learnedState{}, false
	}
	return st, ok
}

// Throttle records a throttle by the channel at now, with the channel's
// retry-after (zero when it gave none), on every learning window given
// (others are skipped): see "Learned limits" above.
func (m *Model) Throttle(windows []KeyWindow, now time.Time, retryAfter time.Duration) {
	at := micros(now)
	for _, w := range windows {
		if !w.Learns() {
			continue
		}
		st, ok := m.learnedAt(w, at)
		next, keep := throttled(w, st, ok, m.slidingAt(w, at).sum, at, retryAfter.Microseconds())
		if keep {
			m.learned[idOf(w)] = next
		} else {
			delete(m.learned, idOf(w))
		}
	}
}

// Learned returns the learned limits in force at now of the learning
// windows given, in their order; it changes nothing.
func (m *Model) Learned(windows []KeyWindow, now time.Time) []LearnedLimit {
	at := micros(now)
	var out []LearnedLimit
	for _, w := range windows {
		if st, ok := m.learned[idOf(w)]; ok && w.Learns() && at < st.e {
			out = append(out, learnedLimit(w, st, at))
		}
	}
	return out
}

// ResetLearned forgets the learned limits of the windows given.
func (m *Model) ResetLearned(windows []KeyWindow) {
	for _, w := range windows {
		delete(m.learned, idOf(w))
	}
}

// putLearned sets window w's learned state, as a compacted journal says
// (DurableStore).
func (m *Model) putLearned(w KeyWindow, st learnedState) { m.learned[idOf(w)] = st }

// eachLearned calls f for every learned state kept, with its window (its
// limit 0: a window's identity has none).
func (m *Model) eachLearned(f func(w KeyWindow, st learnedState)) {
	for id, st := range m.learned {
		f(KeyWindow{Key: id.key, Window: Window{Size: id.size}}, st)
	}
}
