package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// adminToken is the admin token of the payservers the keys table starts.
const adminToken = "bench-scale-admin-token-0123456789"

// endpoint is one admin GET the keys table times.
type endpoint struct {
	name, path string
	// paging marks a first page (?limit=100), which a build without
	// paging answers 400 or ignores.
	paging bool
}

var endpoints = []endpoint{
	{"GET /limits", "/limits", false},
	{"GET /limits?limit=100 (first page)", "/limits?limit=100", true},
	{"GET /dashboard", "/dashboard", false},
	{"GET /channels/usage", "/channels/usage", false},
	{"GET /channels/usage?limit=100 (first page)", "/channels/usage?limit=100", true},
	{"GET /reports/channel-limits", "/reports/channel-limits", false},
	{"GET /reports/channel-amounts", "/reports/channel-amounts", false},
}

// timing is what timing one endpoint gave.
type timing struct {
	median time.Duration
	bytes  int
	// note replaces the figures (paging not available).
	note string
}

// endpoints starts the built payserver (embedded default: SQLite, the
// in-process limiter, a limits file) with each document of the keys table,
// pays once on every key that is not channel-wide, and times the admin
// endpoints.
func (b *bench) endpoints() error {
	dir, err := os.MkdirTemp("", "payserver-bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "payserver")
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/payserver")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/payserver (run from the module root): %v\n%s", err, out)
	}
	results := map[int]map[string]timing{}
	pays := map[int]string{}
	for _, n := range b.o.httpKeys {
		res, paid, err := b.serve(bin, filepath.Join(dir, fmt.Sprint(n)), n)
		if err != nil {
			return fmt.Errorf("payserver with %d keys: %w", n, err)
		}
		results[n], pays[n] = res, paid
	}
	fmt.Printf("The admin endpoints of the built payserver (embedded default: SQLite, the in-process limiter, the document as its limits file; %d simulator\n", keysChannels)
	fmt.Printf("channels), after one POST /pay on every key that is not channel-wide; bearer admin token; median of %d after one unmeasured call, and the body.\n", repeats)
	for _, n := range b.o.httpKeys {
		fmt.Printf("%d keys: %s\n", n, pays[n])
	}
	fmt.Println()
	head, rule := "| endpoint |", "|---|"
	for _, n := range b.o.httpKeys {
		head += fmt.Sprintf(" %d keys: ms | bytes |", n)
		rule += "---:|---:|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for _, e := range endpoints {
		row := "| " + e.name + " |"
		for _, n := range b.o.httpKeys {
			t := results[n][e.name]
			if t.note != "" {
				row += " " + t.note + " | - |"
				continue
			}
			row += fmt.Sprintf(" %.1f | %d |", ms(t.median), t.bytes)
		}
		fmt.Println(row)
	}
	return nil
}

// serve runs one payserver in dir with a document of n keys and times its
// endpoints; it also says how the payments went.
func (b *bench) serve(bin, dir string, n int) (map[string]timing, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	limitsPath, cfgPath := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "payserver.yaml")
	if err := os.WriteFile(limitsPath, keysDocument(n), 0o600); err != nil {
		return nil, "", err
	}
	var cfg strings.Builder
	// The reports read what the stats aggregator has flushed.
	cfg.WriteString("stats: {flushInterval: 1s}\nchannels:\n")
	for c := range keysChannels {
		fmt.Fprintf(&cfg, "  C%02d: {}\n", c)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin)
	// Only what payserver needs: no PAYSERVER_* of the caller's leaks in.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PAYSERVER_HTTP_ADDR=" + addr, "PAYSERVER_DATA_DIR=" + filepath.Join(dir, "data"),
		"PAYSERVER_LIMITS_FILE=" + limitsPath, "PAYSERVER_CONFIG=" + cfgPath,
		"PAYSERVER_ADMIN_TOKEN=" + adminToken, "PAYSERVER_LOG_LEVEL=warn",
	}
	logPath := filepath.Join(dir, "payserver.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stop(cmd, exited)
	base := "http://" + addr
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	if err := waitReady(client, base, exited); err != nil {
		log, _ := os.ReadFile(logPath)
		return nil, "", fmt.Errorf("%w\n%s", err, log)
	}
	paid, err := payEveryKey(client, base, n)
	if err != nil {
		return nil, "", err
	}
	time.Sleep(1500 * time.Millisecond) // a stats flush (1s) after the last payment
	out := map[string]timing{}
	for _, e := range endpoints {
		t, err := timeEndpoint(client, base, e)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", e.name, err)
		}
		out[e.name] = t
	}
	return out, paid, nil
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(client *http.Client, base string, exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("payserver exited at start: %v", err)
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("payserver not ready in 60 s")
}

// stop sends SIGTERM and waits for the exit, killing it after 20 s.
func stop(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// payEveryKey sends one POST /pay on every bizType key of the n-key
// document, 16 at a time, and says how many were answered 200 and how fast.
func payEveryKey(client *http.Client, base string, n int) (string, error) {
	type pay struct{ biz, ch string }
	var todo []pay
	for c := range keysChannels {
		for biz := range n/keysChannels - 1 {
			todo = append(todo, pay{fmt.Sprintf("B%03d", biz), fmt.Sprintf("C%02d", c)})
		}
	}
	var ok atomic.Int64
	statuses := sync.Map{}
	start := time.Now()
	err := parallel(0, len(todo), 16, func(i int) error {
		body, err := json.Marshal(map[string]any{"requestId": fmt.Sprintf("scale-%d", i), "bizType": todo[i].biz,
			"channel": todo[i].ch, "merchantId": "M1", "amount": checkAmount, "currency": "CNY"})
		if err != nil {
			return err
		}
		resp, err := client.Post(base+"/pay", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok.Add(1)
		} else {
			v, _ := statuses.LoadOrStore(resp.StatusCode, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	took := time.Since(start)
	s := fmt.Sprintf("%d POST /pay in %.1f s (%.0f/s), %d answered 200", len(todo), took.Seconds(), float64(len(todo))/took.Seconds(), ok.Load())
	statuses.Range(func(k, v any) bool {
		s += fmt.Sprintf(", %d answered %d", v.(*atomic.Int64).Load(), k.(int))
		return true
	})
	return s, nil
}

// timeEndpoint times e: one unmeasured call, then the median of repeats.
func timeEndpoint(client *http.Client, base string, e endpoint) (timing, error) {
	ts := make([]time.Duration, repeats)
	var t timing
	for i := -1; i < repeats; i++ {
		req, err := http.NewRequest(http.MethodGet, base+e.path, nil)
		if err != nil {
			return t, err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return t, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil {
			return t, err
		}
		if e.paging {
			if note := pagingMissing(resp.StatusCode, body); note != "" {
				return timing{note: note}, nil
			}
		}
		if resp.StatusCode != http.StatusOK {
			return t, fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
		}
		if i >= 0 {
			ts[i] = took
		}
		t.bytes = len(body)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	t.median = ts[repeats/2]
	return t, nil
}

// pagingMissing says why a first page (?limit=100) is not a page, or "" when
// it is one: the server refused the parameter (400), or ignored it (an
// answer without total and next).
func pagingMissing(status int, body []byte) string {
	switch status {
	case http.StatusBadRequest:
		return "paging not available (400)"
	case http.StatusOK:
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			return ""
		}
		_, total := top["total"]
		_, next := top["next"]
		if !total && !next {
			return "paging not available (limit ignored: no total or next)"
		}
	}
	return ""
}
