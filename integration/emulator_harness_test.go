package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
)

// emulatorBinary is cmd/channel-emulator, built once by TestMain.
var emulatorBinary string

// gatewaySecret signs every message between payserver and the emulator.
const gatewaySecret = "it-gateway-secret-0123456789abcdefghij"

// emulator is one channel-emulator process.
type emulator struct {
	t       testing.TB
	addr    string
	ledger  string
	notify  string
	logPath string
	// channels are the codes it serves; empty: its default set.
	channels string
	cmd      *exec.Cmd
	done     chan struct{}
}

// startEmulator starts the channel emulator on a free loopback port with a
// fresh ledger; notifyURL is payserver's base URL ("" for none).
func startEmulator(t testing.TB, notifyURL string) *emulator {
	t.Helper()
	return startEmulatorWith(t, notifyURL, "")
}

// startEmulatorWith starts the emulator serving the channels codes (a comma
// list; empty: its default set).
func startEmulatorWith(t testing.TB, notifyURL, codes string) *emulator {
	t.Helper()
	dir := t.TempDir()
	e := &emulator{t: t, addr: freePort(t), ledger: filepath.Join(dir, "ledger.db"), notify: notifyURL,
		logPath: filepath.Join(dir, "emulator.log"), channels: codes}
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			b, _ := os.ReadFile(e.logPath)
			t.Logf("channel emulator log:\n%s", logTail(string(b), 80))
		}
	})
	e.start()
	return e
}

func (e *emulator) base() string { return "http://" + e.addr }

func (e *emulator) start() {
	t := e.t
	t.Helper()
	logFile, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-addr", e.addr, "-secret", gatewaySecret, "-ledger", e.ledger}
	if e.notify != "" {
		args = append(args, "-notify-url", e.notify)
	}
	if e.channels != "" {
		args = append(args, "-channels", e.channels)
	}
	cmd := exec.Command(emulatorBinary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.cmd, e.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(e.done)
	}()
	waitFor(t, "the channel emulator to answer", 15*time.Second, func() bool {
		resp, err := http.Get(e.base() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (e *emulator) stop() {
	if e.cmd == nil {
		return
	}
	select {
	case <-e.done:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// kill9 kills the emulator without a chance to clean up.
func (e *emulator) kill9() {
	_ = e.cmd.Process.Kill()
	<-e.done
}

// set changes a channel's behaviour through the admin endpoint.
func (e *emulator) set(code string, behaviour map[string]any) {
	e.t.Helper()
	b, _ := json.Marshal(behaviour)
	resp, err := http.Post(e.base()+"/admin/channels/"+code, "application/json", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("admin %s %s: %d", code, b, resp.StatusCode)
	}
}

// calm sets every behaviour of code back to the default: SUCCEEDED at once.
func (e *emulator) calm(code string) {
	e.set(code, map[string]any{"latencyMs": 0, "declineRate": 0, "lostAnswerRate": 0, "dropRate": 0, "refuseRate": 0,
		"errorRate": 0, "processingRate": 0, "throttleCapacity": 0, "pauseMs": 0, "notify": false})
}

// ledgerLine is one line of GET /ledger.
type ledgerLine struct {
	Op           string `json:"op"`
	Channel      string `json:"channel"`
	OrderNo      string `json:"orderNo"`
	RequestID    string `json:"requestId"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	ReceivedAtUs int64  `json:"receivedAtUs"`
	Outcome      string `json:"outcome"`
	MoneyMoved   bool   `json:"moneyMoved"`
	TradeNo      string `json:"tradeNo"`
}

func (e *emulator) ledgerLines() []ledgerLine {
	e.t.Helper()
	resp, err := http.Get(e.base() + "/ledger")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []ledgerLine
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l ledgerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			e.t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// gatewayServer starts payserver (real MariaDB and Redis) with every
// channel served by the emulator at base, notifications at its own
// address; env adds to the settings.
func gatewayServer(t testing.TB, addr, emuBase, limits, config string, env map[string]string) *server {
	t.Helper()
	all := map[string]string{
		"PAYSERVER_HTTP_ADDR":              addr,
		"PAYSERVER_CHANNEL_GATEWAY_URL":    emuBase,
		"PAYSERVER_CHANNEL_GATEWAY_SECRET": gatewaySecret,
		"PAYSERVER_CHANNEL_TIMEOUT":        "1s",
	}
	for k, v := range env {
		all[k] = v
	}
	return startServer(t, serverOptions{Env: all, Limits: limits, Config: withResolver(config, "resolver: {backoff: 200ms, maxBackoff: 1s}\n")})
}

// checkAgainstLedger compares payserver's orders with the emulator's books:
// no order left UNKNOWN or PROCESSING, at most one processed pay per
// requestId, a SUCCEEDED order has exactly one pay where money moved (with
// its trade number), and no other order has any.
func checkAgainstLedger(t testing.TB, s *server, e *emulator, ids []string) {
	t.Helper()
	moved := map[string][]ledgerLine{}
	for _, l := range e.ledgerLines() {
		if l.Op == "pay" && l.MoneyMoved {
			moved[l.RequestID] = append(moved[l.RequestID], l)
		}
	}
	mine := map[string]bool{}
	for _, id := range ids {
		mine[id] = true
		r := s.do(t, http.MethodGet, "/pay/"+id, nil, nil)
		if r.Status != 200 {
			t.Errorf("GET /pay/%s: %d %s", id, r.Status, r.Body)
			continue
		}
		o := r.JSON(t)
		status, _ := o["status"].(string)
		switch {
		case status == "UNKNOWN" || status == "PROCESSING":
			t.Errorf("%s is still %s although the emulator answers", id, status)
		case len(moved[id]) > 1:
			t.Errorf("%s: money moved %d times in the ledger", id, len(moved[id]))
		case status == "SUCCEEDED" && len(moved[id]) != 1:
			t.Errorf("%s is SUCCEEDED but the ledger shows no pay that moved money", id)
		case status == "SUCCEEDED" && moved[id][0].TradeNo != o["channelTradeNo"]:
			t.Errorf("%s: trade number %v, ledger %s", id, o["channelTradeNo"], moved[id][0].TradeNo)
		case status != "SUCCEEDED" && len(moved[id]) != 0:
			t.Errorf("%s is %s (%v) but the ledger shows money moved", id, status, o["failureCode"])
		}
	}
	for id := range moved {
		if !mine[id] {
			t.Errorf("the ledger shows money moved for %s, which payserver never paid", id)
		}
	}
}

// waitResolved waits until GET /pay/id is final and returns it.
func waitResolved(t testing.TB, s *server, id string, within time.Duration) map[string]any {
	t.Helper()
	var o map[string]any
	waitFor(t, id+" to be resolved", within, func() bool {
		r := s.do(t, http.MethodGet, "/pay/"+id, nil, nil)
		if r.Status != 200 {
			return false
		}
		o = r.JSON(t)
		return o["status"] != "UNKNOWN" && o["status"] != "PROCESSING"
	})
	return o
}

// signedNotify posts a notification to payserver, signed with secret
// (key id "default").
func signedNotify(t testing.TB, s *server, code string, a gateway.Answer, secret string) reply {
	t.Helper()
	body, _ := json.Marshal(a)
	h := http.Header{}
	path := "/channels/" + code + "/notify"
	gateway.Sign(h, gateway.Key{ID: "default", Secret: []byte(secret)}, gateway.Message{Method: http.MethodPost, Path: path, Body: body}, time.Now())
	return s.do(t, http.MethodPost, path, body, h)
}

// maxInAnyWindow is the most times in any window of length w.
func maxInAnyWindow(us []int64, w time.Duration) int {
	sort.Slice(us, func(i, j int) bool { return us[i] < us[j] })
	best, lo := 0, 0
	for hi := range us {
		for us[hi]-us[lo] >= w.Microseconds() {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
