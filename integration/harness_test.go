// Package integration runs the built payserver binary as real processes
// against real MariaDB, Redis and Nacos on loopback. TestMain starts the
// shared ones (internal/testenv) on free ports while it builds the binaries;
// tests that kill servers start their own.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"payserver/api"
	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

var (
	// binary is built with the race detector; fastBinary without, for tests
	// that measure latency.
	binary, fastBinary string
	validator          *api.Validator
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "payserver-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	servers, err := testenv.NewSession("payserver-it-servers")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The shared servers start while the binaries build; PAYSERVER_TEST_*
	// variables already set keep their value. Without the servers installed
	// the tests that need them skip (fail with CI=true).
	var set *testenv.Set
	setUp := make(chan struct{})
	go func() {
		defer close(setUp)
		if testenv.Installed() || testutil.CI() {
			set = testenv.StartSet(servers, testenv.SharedSet)
		}
	}()
	binary = filepath.Join(dir, "payserver-race")
	fastBinary = filepath.Join(dir, "payserver")
	emulatorBinary = filepath.Join(dir, "channel-emulator")
	for _, args := range [][]string{{"build", "-race", "-o", binary, "../cmd/payserver"}, {"build", "-o", fastBinary, "../cmd/payserver"},
		{"build", "-o", emulatorBinary, "../cmd/channel-emulator"}} {
		build := exec.Command("go", args...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build payserver:", err)
			servers.Close()
			os.Exit(1)
		}
	}
	validator, err = api.NewValidator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		servers.Close()
		os.Exit(1)
	}
	<-setUp
	if set != nil {
		for _, kv := range set.Env() {
			// A server the caller named wins (e.g. another Nacos).
			if name, value, _ := strings.Cut(kv, "="); os.Getenv(name) == "" {
				_ = os.Setenv(name, value)
			}
		}
	}
	code := m.Run()
	servers.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is one payserver process.
type server struct {
	t       testing.TB
	cmd     *exec.Cmd
	base    string
	logPath string
	done    chan struct{}
	env     map[string]string
	bin     string
}

// serverOptions configure a process. Env entries override the defaults.
type serverOptions struct {
	Env map[string]string
	// Limits is the content of the watched limits file (file source).
	Limits string
	// LimitsPath, when set, is used instead of a fresh file.
	LimitsPath string
	// Config is YAML written to PAYSERVER_CONFIG (channels, etc.).
	Config string
	// Embedded leaves MySQL and Redis unset.
	Embedded bool
	// DSN shares a database between processes; empty makes a fresh one.
	DSN string
	// Fast runs the binary built without the race detector, for tests
	// that assert latency.
	Fast bool
}

// nearCacheOff is the settings of a server whose every check goes to the
// shared store.
const nearCacheOff = "limiter: {nearCache: false}\n"

// settingsWithDefaults is the settings file of a test server: config, and
// unless it sets its own, a resolver that asks about unknown outcomes
// after 1 s rather than the default 5 s (the tests wait for their
// resolution).
func settingsWithDefaults(config string) string {
	return withResolver(config, "resolver: {backoff: 1s}\n")
}

// withResolver is config with the resolver settings given, unless config
// has its own.
func withResolver(config, resolver string) string {
	if strings.HasPrefix(config, "resolver:") || strings.Contains(config, "\nresolver:") {
		return config
	}
	return resolver + config
}

// freePort is a loopback address for a server the test starts.
func freePort(t testing.TB) string {
	t.Helper()
	return testutil.FreeAddr(t)
}

// startServer starts payserver and waits until /healthz answers.
func startServer(t testing.TB, opts serverOptions) *server {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"PAYSERVER_HTTP_ADDR":  freePort(t),
		"PAYSERVER_DATA_DIR":   filepath.Join(dir, "data"),
		"PAYSERVER_LOG_FORMAT": "json",
		"PAYSERVER_LOG_LEVEL":  "info",
	}
	if !opts.Embedded {
		env["PAYSERVER_REDIS_ADDR"] = testutil.RedisAddr(t)
		dsn := opts.DSN
		if dsn == "" {
			dsn = testutil.MustFreshMySQL(t)
		}
		env["PAYSERVER_MYSQL_DSN"] = dsn
		env["PAYSERVER_AUTO_MIGRATE"] = "true"
	}
	limitsPath := opts.LimitsPath
	if limitsPath == "" {
		limitsPath = filepath.Join(dir, "limits.yaml")
		limits := opts.Limits
		if limits == "" {
			limits = "limits:\n  ONLINE_PAY:ALIPAY: 1000\n"
		}
		mustWrite(t, limitsPath, limits)
	}
	env["PAYSERVER_LIMITS_FILE"] = limitsPath
	cfgPath := filepath.Join(dir, "payserver.yaml")
	mustWrite(t, cfgPath, settingsWithDefaults(opts.Config))
	env["PAYSERVER_CONFIG"] = cfgPath
	for k, v := range opts.Env {
		env[k] = v
	}
	s := &server{t: t, base: "http://" + env["PAYSERVER_HTTP_ADDR"], logPath: filepath.Join(dir, "payserver.log"), done: make(chan struct{}), env: env, bin: binary}
	if opts.Fast {
		s.bin = fastBinary
	}
	// The cleanup comes first, so that a process whose start failed the
	// test is stopped too (stop handles a process never started).
	t.Cleanup(func() {
		s.stop()
		s.checkLog()
	})
	s.start()
	return s
}

func (s *server) start() {
	t := s.t
	t.Helper()
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			t.Fatalf("payserver exited at start:\n%s", s.logs())
		default:
		}
		resp, err := http.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("payserver did not answer /healthz in 20s:\n%s", s.logs())
}

// stop sends SIGTERM and waits for a graceful exit.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("payserver did not stop within 20s of SIGTERM")
	}
}

// checkLog runs once, when the test ends and the process has stopped,
// however it stopped (a crash, the test's own stop, or the cleanup): a data
// race in any of the process's runs fails the test, and a failed test shows
// the end of the log.
func (s *server) checkLog() {
	if strings.Contains(s.logs(), "DATA RACE") {
		s.t.Errorf("payserver hit a data race:\n%s", s.logs())
	} else if s.t.Failed() {
		s.t.Logf("%s: the last lines of its log:\n%s", s.base, logTail(s.logs(), 200))
	}
}

// logTail returns the last n lines of a log, so that a failed CI run shows
// what the servers it started were doing.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (s *server) logs() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reply is one HTTP answer, already checked against api/openapi.yaml.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}

func (s *server) do(t testing.TB, method, path string, body []byte, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		if k == "Host" { // the request's Host, not a header field
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := validator.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
		t.Errorf("%s %s answered %d, which breaks api/openapi.yaml: %v\n%s", method, path, resp.StatusCode, err, b)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (s *server) pay(t testing.TB, body map[string]any) reply {
	t.Helper()
	b, _ := json.Marshal(body)
	return s.do(t, http.MethodPost, "/pay", b, nil)
}

func payBody(requestID, biz, ch string) map[string]any {
	return map[string]any{
		"requestId": requestID, "bizType": biz, "channel": ch,
		"merchantId": "M-1001", "amount": 1999, "currency": "CNY", "subject": "order 42",
	}
}

// metric sums the samples of a Prometheus metric whose label set contains
// every given label="value" pair.
func (s *server) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	r := s.do(t, http.MethodGet, "/metrics", nil, nil)
	if r.Status != 200 {
		t.Fatalf("/metrics answered %d", r.Status)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err == nil {
			sum += f
		}
	}
	return sum
}

// parallel runs f(i) for i in [0, n) on `workers` goroutines at once.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
}

var _ = context.Background

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
