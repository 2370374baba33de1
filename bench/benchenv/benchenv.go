// Package benchenv prints the conditions every payserver benchmark states
// in its header: the commit measured, the machine, the load average at the
// start and at the end, and what else used the CPUs while it ran.
//
// "What else" is every process outside the benchmark's own: the process
// group the benchmark runs in (make, the testenv command, the shell
// scripts, go run) and every descendant of a process in it, so the
// servers the benchmark starts (which testenv puts in process groups of
// their own) count as its own. Their CPU is read from /proc at Begin and at
// End: a process that started and ended between the two is not seen.
//
// Go benchmarks call Begin and End; shell scripts call the benchenv command
// (bench/benchenv/cmd/benchenv), which keeps the state between the two in
// a file.
package benchenv

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go runs on.
const userHZ = 100

// busiest is how many other processes a header names.
const busiest = 5

// sampleAtBegin is how long Begin watches what else runs before the
// benchmark starts.
const sampleAtBegin = 500 * time.Millisecond

// Run is one benchmark's conditions, from Begin to End.
type Run struct {
	Title string    `json:"title"`
	Start time.Time `json:"start"`
	// Group is the process group of the benchmark (Begin's caller's).
	Group int `json:"group"`
	// CPU is every process's CPU ticks at Begin.
	CPU map[string]int64 `json:"cpu"`
}

// Begin prints the header of a benchmark titled title to w: the commit,
// the machine, the load average and the busiest other processes over half a
// second, and returns the Run that End closes.
func Begin(w io.Writer, title string) *Run {
	before := readProcs()
	time.Sleep(sampleAtBegin)
	r := &Run{Title: title, Start: time.Now(), Group: syscall.Getpgrp()}
	now := readProcs()
	r.CPU = make(map[string]int64, len(now))
	for id, p := range now {
		r.CPU[id] = p.ticks
	}
	fmt.Fprintf(w, "== %s\n", title)
	fmt.Fprintf(w, "commit:   %s\n", Commit())
	fmt.Fprintf(w, "machine:  %s\n", Machine())
	fmt.Fprintf(w, "load:     %s at the start, %s\n", loadavg(), r.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "others:   %s\n", busy(before, now, sampleAtBegin, r.Group, "over the last 0.5 s"))
	return r
}

// End prints the load average at the end and the busiest other processes
// over the whole run.
func (r *Run) End(w io.Writer) {
	took := time.Since(r.Start)
	before := make(map[string]proc, len(r.CPU))
	for id, t := range r.CPU {
		before[id] = proc{ticks: t}
	}
	fmt.Fprintf(w, "== end of %s, after %s\n", r.Title, took.Round(time.Second))
	fmt.Fprintf(w, "load:     %s at the end\n", loadavg())
	fmt.Fprintf(w, "others:   %s\n", busy(before, readProcs(), took, r.Group, "over the run"))
}

// Save writes r to path, for a later Load (the benchenv command's end).
func (r *Run) Save(path string) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Load reads a Run that Save wrote.
func Load(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("benchenv state %s: %w", path, err)
	}
	return &r, nil
}

// Commit returns the short hash of HEAD in the working directory's
// checkout, with "-dirty" when tracked files have changes, or a sentence
// saying why it is unknown.
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout?)"
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	switch {
	case err != nil:
		c += " (clean or dirty: git status failed)"
	case len(strings.TrimSpace(string(st))) > 0:
		c += "-dirty"
	}
	return c
}

// Machine describes the CPUs, the memory and the Go runtime.
func Machine() string {
	return fmt.Sprintf("nproc %d (CPUs allowed %s), %s, %s memory; %s %s/%s GOMAXPROCS %d",
		runtime.NumCPU(), procField("/proc/self/status", "Cpus_allowed_list"), cpuModel(), memTotal(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	if m := procField("/proc/cpuinfo", "model name"); m != "" {
		return m
	}
	return "CPU model unknown"
}

// memTotal is MemTotal of /proc/meminfo in GiB.
func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

// procField returns the value of the first "name: value" line of a /proc
// file, or "".
func procField(path, name string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadavg is the three load averages of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid, group int
	comm             string
	ticks            int64 // user + system CPU
}

// readProcs reads every process, keyed by pid and start time (so that a
// reused pid is another process).
func readProcs() map[string]proc {
	out := map[string]proc{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		// After the command: state ppid pgrp session tty tpgid flags
		// minflt cminflt majflt cmajflt utime stime ... starttime (20th).
		f := strings.Fields(s[end+1:])
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		group, _ := strconv.Atoi(f[2])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[e.Name()+"@"+f[19]] = proc{pid: pid, ppid: ppid, group: group, comm: s[open+1 : end], ticks: ut + st}
	}
	return out
}

// busy names the processes outside group (and outside every descendant of
// a process in it) that used the most CPU between before and now, over
// the span d, in % of one CPU.
func busy(before, now map[string]proc, d time.Duration, group int, over string) string {
	byPid := make(map[int]proc, len(now))
	for _, p := range now {
		byPid[p.pid] = p
	}
	own := func(p proc) bool {
		for i := 0; i < 64 && p.pid > 1; i++ { // bounded: a pid cycle cannot loop
			if p.group == group {
				return true
			}
			var ok bool
			if p, ok = byPid[p.ppid]; !ok {
				return false
			}
		}
		return false
	}
	type use struct {
		p   proc
		pct float64
	}
	var others []use
	var total float64
	for id, p := range now {
		if own(p) {
			continue
		}
		pct := float64(p.ticks-before[id].ticks) / userHZ / d.Seconds() * 100
		if pct <= 0 {
			continue
		}
		total += pct
		others = append(others, use{p, pct})
	}
	sort.Slice(others, func(i, j int) bool { return others[i].pct > others[j].pct })
	if len(others) == 0 {
		return "no other process used CPU " + over
	}
	var s []string
	for i, u := range others {
		if i == busiest {
			break
		}
		s = append(s, fmt.Sprintf("%s %.0f%% (pid %d)", u.p.comm, u.pct, u.p.pid))
	}
	return fmt.Sprintf("%.0f%% of one CPU in all %s, the busiest: %s", total, over, strings.Join(s, ", "))
}
