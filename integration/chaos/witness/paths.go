package witness

// The paths a limiter check takes, by the shape of the windows it checks
// (docs/DESIGN.md, "The limiter"): a key with one sliding count window of
// its own, no reservation and no learning is checked by the plain script;
// every other shape by the full one, which handles several windows,
// channel-wide reservations, calendar periods, amounts and learned limits.
// A check counts under every feature it meets.
const (
	PathPlain     = "plain"
	PathSeveral   = "several windows"
	PathReserved  = "channel-wide reservations"
	PathCalendar  = "calendar"
	PathAmount    = "amount"
	PathLearned   = "learned"
	PathUnlimited = "unlimited"
)

// paths lists the paths in the order a report gives them.
var paths = []string{PathPlain, PathSeveral, PathReserved, PathCalendar, PathAmount, PathLearned, PathUnlimited}

// PathCount is how many limiter checks of one path the history holds:
// pinned payments and acquisitions answered 200 or 429 (Checks), and of
// those, the 429s (Refused): a path with no refusal was never driven to
// its limit.
type PathCount struct {
	Path    string
	Checks  int
	Refused int
}

// pathsOf names the paths a request of bizType on channel with this amount
// takes under rs.
func pathsOf(rs ruleSet, amount int64, currency string) []string {
	var ws []scoped
	for _, s := range rs.windowsFor(amount, currency) {
		if !s.shadow {
			ws = append(ws, s)
		}
	}
	learns := func(s scoped) bool {
		l := rs.doc.Learning[s.key]
		return !l.Off && !s.window.ID.Amount && s.window.ID.Calendar == ""
	}
	switch {
	case len(ws) == 0:
		return []string{PathUnlimited}
	case len(ws) == 1 && !ws[0].window.ID.Amount && ws[0].window.ID.Calendar == "" && len(ws[0].window.Reserve) == 0 && !learns(ws[0]):
		return []string{PathPlain}
	}
	has := map[string]bool{PathSeveral: len(ws) > 1}
	for _, s := range ws {
		has[PathReserved] = has[PathReserved] || len(s.window.Reserve) > 0
		has[PathCalendar] = has[PathCalendar] || s.window.ID.Calendar != ""
		has[PathAmount] = has[PathAmount] || s.window.ID.Amount
		has[PathLearned] = has[PathLearned] || learns(s)
	}
	var out []string
	for _, p := range paths {
		if has[p] {
			out = append(out, p)
		}
	}
	return out
}

// paths counts the history's limiter checks by path, under the rules in
// force when each was sent.
func (c *checker) paths() []PathCount {
	counts := map[string]*PathCount{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if (op.Kind != "pay" && op.Kind != "acquire") || op.Channel == "" || (op.Status != 200 && op.Status != 429) {
			continue
		}
		rules := c.rulesFor(op.BizType, op.Channel, c.docsIn(op.InvokeUs, op.InvokeUs), op.InvokeUs, op.InvokeUs)
		if len(rules) == 0 {
			continue
		}
		for _, p := range pathsOf(rules[len(rules)-1], op.Amount, op.Currency) {
			pc := counts[p]
			if pc == nil {
				pc = &PathCount{Path: p}
				counts[p] = pc
			}
			pc.Checks++
			if op.Status == 429 {
				pc.Refused++
			}
		}
	}
	var out []PathCount
	for _, p := range paths {
		if pc := counts[p]; pc != nil {
			out = append(out, *pc)
		}
	}
	return out
}
