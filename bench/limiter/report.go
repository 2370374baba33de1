package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// parseRBCSV reads redis-benchmark --csv output:
//
//	"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
//	"EVALSHA ...","12345.67",...
func parseRBCSV(out string) (result, error) {
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		return result{}, err
	}
	col := map[string]int{}
	for _, rec := range recs {
		if len(rec) > 0 && rec[0] == "test" {
			for i, h := range rec {
				col[h] = i
			}
			continue
		}
		if len(col) == 0 || len(rec) != len(col) {
			continue
		}
		ms := func(name string) (time.Duration, error) {
			i, ok := col[name]
			if !ok {
				return 0, fmt.Errorf("no %s column", name)
			}
			f, err := strconv.ParseFloat(rec[i], 64)
			return time.Duration(f * float64(time.Millisecond)), err
		}
		var r result
		i, ok := col["rps"]
		if !ok {
			return result{}, errors.New("no rps column")
		}
		if r.rate, err = strconv.ParseFloat(rec[i], 64); err != nil {
			return result{}, err
		}
		if r.p50, err = ms("p50_latency_ms"); err != nil {
			return result{}, err
		}
		if r.p99, err = ms("p99_latency_ms"); err != nil {
			return result{}, err
		}
		if r.rate <= 0 {
			return result{}, errors.New("rps is 0")
		}
		return r, nil
	}
	return result{}, errors.New("no result row")
}

func caseOf(id string) string {
	if strings.HasSuffix(id, "-full") {
		return "saturated"
	}
	return "open"
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

func fmtF(f float64, prec int) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', prec, 64)
}

func fmtRate(f float64) string {
	s := strconv.FormatFloat(f, 'f', 0, 64)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func printTable(rows []result, conc int) {
	fmt.Printf("Each row: %d concurrent callers on one key for a fixed time. open = limit %d/s (all admitted); saturated = limit %d/s (almost all refused).\n",
		conc, openLimit, fullLimit)
	fmt.Println("Redis columns come from CONFIG RESETSTAT + INFO commandstats (command time, Lua included) and INFO cpu (whole server process: command time plus socket I/O and event loop).")
	fmt.Println()
	fmt.Println("| contender | id | checks/s | p50 | p99 | admitted | Redis calls/check | Redis cmd µs/check | Redis CPU µs/check | client CPU µs/check |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		adm := "-"
		if !math.IsNaN(r.admitted) {
			adm = fmtF(100*r.admitted, 1) + "%"
		}
		fmt.Printf("| %s: %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			caseOf(r.id), r.name, r.id, fmtRate(r.rate), fmtDur(r.p50), fmtDur(r.p99), adm,
			fmtF(r.callsPerCheck, 3), fmtF(r.cmdUsPerCheck, 2), fmtF(r.srvCPUPerCheck, 2), fmtF(r.cliCPUPerCheck, 2))
	}
	for _, r := range rows {
		for _, n := range r.notes {
			fmt.Printf("note %s: %s\n", r.id, n)
		}
	}
}

func find(rows []result, id string) (result, bool) {
	for _, r := range rows {
		if r.id == id {
			return r, true
		}
	}
	return result{}, false
}

// printRatios prints each ratio of checks/s. With several rounds of the open
// contenders, a ratio is the median of the per-round ratios (each round runs
// the two contenders back to back, so slow drifts in machine load cancel).
func printRatios(rows []result, rounds map[string][]result) {
	type ratio struct {
		name, num, den string
		target         float64 // 0: informational
	}
	// The targets are judged on payserver as shipped (co-*: coalesced);
	// the unbatched store's ratios are printed beside them.
	ratios := []ratio{
		{"payserver/redis-benchmark-evalsha", "co-open", "rb-open", 0.9},
		{"payserver/redis_rate-allown", "co-open", "rr-open", 1.2},
		{"payserver/naive-3cmd", "co-open", "naive-open", 2.0},
		{"unbatched payserver/redis-benchmark-evalsha", "store-open", "rb-open", 0},
		{"unbatched payserver/redis_rate-allown", "store-open", "rr-open", 0},
		{"unbatched payserver/naive-3cmd", "store-open", "naive-open", 0},
		{"coalesced/unbatched", "co-open", "store-open", 0},
		{"learning/adaptive-off (unbatched, no learned limit in force)", "store-open-learn", "store-open", 0},
		{"saturated payserver/redis-benchmark-evalsha", "co-full", "rb-full", 0},
		{"saturated payserver/redis_rate-allown", "co-full", "rr-full", 0},
		{"saturated payserver/naive-3cmd", "co-full", "naive-full", 0},
		{"saturated unbatched payserver/redis-benchmark-evalsha", "store-full", "rb-full", 0},
		{"saturated limiter-near-cache/store", "limiter-full", "co-full", 0},
		{"saturated merchants limiter-near-cache/store", "limiter-merchant-full", "co-full", 0},
		{"open limiter/store", "limiter-open", "co-open", 0},
	}
	for _, q := range ratios {
		num, ok1 := find(rows, q.num)
		den, ok2 := find(rows, q.den)
		if !ok1 || !ok2 {
			continue
		}
		v := num.rate / den.rate
		rn, rd := rounds[q.num], rounds[q.den]
		per := ""
		if len(rn) > 1 && len(rn) == len(rd) {
			var vs []float64
			var ss []string
			for i := range rn {
				vs = append(vs, rn[i].rate/rd[i].rate)
				ss = append(ss, fmt.Sprintf("%.2f", vs[i]))
			}
			sort.Float64s(vs)
			v = (vs[(len(vs)-1)/2] + vs[len(vs)/2]) / 2
			per = " per round: " + strings.Join(ss, ", ") + ";"
		}
		if q.target == 0 {
			how := fmt.Sprintf("checks/s %s / %s", q.num, q.den)
			if per != "" {
				how += "; median of paired rounds;" + strings.TrimSuffix(per, ";")
			}
			fmt.Printf("INFO  %s = %.2f (%s)\n", q.name, v, how)
			continue
		}
		verdict := "PASS"
		if v < q.target {
			verdict = "MISS"
		}
		fmt.Printf("RATIO %s = %.2f (target >= %.1f) %s\n", q.name, v, q.target, verdict)
		if per != "" {
			fmt.Printf("      (median of paired rounds;%s medians of checks/s give %.2f)\n", per, num.rate/den.rate)
		}
	}
}

// printCPUModel prints, for each ratio pair, the ratio that CPU cost alone
// predicts when clients and Redis share the same cores: the inverse ratio of
// (Redis CPU + client CPU) per check. CPU per check moves much less with
// outside load than throughput does.
func printCPUModel(rows []result) {
	for _, q := range [][2]string{{"co-open", "rb-open"}, {"co-open", "rr-open"}, {"co-open", "naive-open"}, {"store-open", "rb-open"}} {
		num, ok1 := find(rows, q[0])
		den, ok2 := find(rows, q[1])
		if !ok1 || !ok2 {
			continue
		}
		cn := num.srvCPUPerCheck + num.cliCPUPerCheck
		cd := den.srvCPUPerCheck + den.cliCPUPerCheck
		fmt.Printf("INFO  CPU-bound estimate %s/%s = %.2f (Redis+client CPU per check: %.0f µs vs %.0f µs)\n", q[0], q[1], cd/cn, cn, cd)
	}
}

// printServerCPU prints Redis command time per check (INFO commandstats:
// EVALSHA usec / checks). For the unbatched store that is usec_per_call;
// for the coalesced store one call decides a whole batch, so it is
// usec_per_call / batch size, and the line shows both.
func printServerCPU(rows []result, lua ref) {
	const target = 6.0
	for _, c := range []struct {
		id, label string
		judged    bool
	}{
		{"co-open", "payserver open, as shipped (coalesced)", true},
		{"co-full", "payserver saturated, as shipped (coalesced)", true},
		{"store-open", "payserver open, unbatched", false},
		{"store-full", "payserver saturated, unbatched", false},
	} {
		r, ok := find(rows, c.id)
		if !ok || math.IsNaN(r.evalshaPerCall) {
			continue
		}
		verdict := "(reported)"
		if c.judged {
			verdict = "PASS"
			if r.cmdUsPerCheck > target {
				verdict = "MISS"
			}
			verdict = fmt.Sprintf("(target <= %.0f) %s", target, verdict)
		}
		rel := ""
		if lua.bare > 0 {
			rel = fmt.Sprintf("; a bare EVALSHA of `return 1` costs %.2f µs here", lua.bare)
		}
		fmt.Printf("CPU   %s: Redis command time per check = %.2f µs %s (usec_per_call %.2f µs, %.3f calls per check%s)\n",
			c.label, r.cmdUsPerCheck, verdict, r.evalshaPerCall, r.callsPerCheck, rel)
	}
	for _, id := range []string{"rb-open", "rb-full", "rr-open", "rr-full"} {
		if r, ok := find(rows, id); ok && !math.IsNaN(r.evalshaPerCall) {
			fmt.Printf("INFO  %s: Redis cmdstat_evalsha usec_per_call = %.2f µs\n", id, r.evalshaPerCall)
		}
	}
	for _, id := range []string{"naive-open", "naive-full"} {
		if r, ok := find(rows, id); ok {
			fmt.Printf("INFO  %s: Redis command time = %.2f µs per check over %.2f commands\n", id, r.cmdUsPerCheck, r.callsPerCheck)
		}
	}
}
