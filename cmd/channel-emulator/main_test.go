package main

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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
	"payserver/internal/testutil"
)

// testSecret is the emulator's -secret in these tests.
const testSecret = "channel-emulator-test-secret-0123456789"

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no secret", []string{"-addr", "127.0.0.1:0"}, 2, "-secret or -key is required"},
		{"bad key", []string{"-key", "ALIPAY=nosecret"}, 2, "want CODE=ID:SECRET"},
		{"short key", []string{"-key", "ALIPAY=k1:short", "-secret", testSecret, "-addr", "127.0.0.1:0", "-ledger", filepath.Join(t.TempDir(), "l.db")}, 1, "shorter than 32"},
		{"not loopback", []string{"-secret", testSecret, "-addr", "0.0.0.0:0", "-ledger", filepath.Join(t.TempDir(), "l.db")}, 1, "not a loopback address"},
		{"bad behaviour", []string{"-secret", testSecret, "-behaviour", `ALIPAY={"dropRate":7}`}, 2, "dropRate"},
		{"bad level", []string{"-secret", testSecret, "-log-level", "loud"}, 2, "-log-level"},
		{"unknown channel behaviour", []string{"-secret", testSecret, "-addr", "127.0.0.1:0", "-ledger", filepath.Join(t.TempDir(), "l.db"), "-channels", "ALIPAY", "-behaviour", `WECHAT={}`}, 1, "WECHAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// binary builds the command once per test run.
var binary = struct {
	once sync.Once
	path string
	err  error
	out  []byte
}{}

func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "channel-emulator-test")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "channel-emulator")
		binary.out, binary.err = exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
	})
	if binary.err != nil {
		t.Fatalf("go build: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.path != "" {
		_ = os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

// process is the running binary.
type process struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	logs   *testutil.LogBuffer
	exited chan error
}

// start runs the binary on a free loopback port and waits for it to say
// where it listens.
func start(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(buildBinary(t), append([]string{"-addr", "127.0.0.1:0"}, args...)...), logs: &testutil.LogBuffer{}, exited: make(chan error, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("the emulator did not say where it listens:\n%s", p.logs.String())
	}
	return p
}

// pay sends a signed pay and returns the answer (its signature checked),
// or why there is none. It may run outside the test's goroutine.
func (p *process) pay(t *testing.T, client *http.Client, secret, channel string, req gateway.PayRequest) (gateway.Answer, error) {
	t.Helper()
	return p.payWith(t, client, gateway.Key{ID: emulator.DefaultKeyID, Secret: []byte(secret)}, channel, req)
}

// payWith is pay signed with key, the answer checked under it.
func (p *process) payWith(t *testing.T, client *http.Client, key gateway.Key, channel string, req gateway.PayRequest) (gateway.Answer, error) {
	t.Helper()
	body, _ := json.Marshal(req)
	hreq, _ := http.NewRequest(http.MethodPost, p.base+"/"+channel+gateway.PathPay, bytes.NewReader(body))
	gateway.Sign(hreq.Header, key, gateway.Message{Method: http.MethodPost, Path: hreq.URL.Path, Body: body}, time.Now())
	resp, err := client.Do(hreq)
	if err != nil {
		return gateway.Answer{}, err
	}
	defer resp.Body.Close()
	answerBody, _ := io.ReadAll(resp.Body)
	if _, err := gateway.Verify(resp.Header, gateway.Keys{key}, gateway.Message{Method: http.MethodPost, Path: hreq.URL.Path, Body: answerBody, Answer: true}, time.Now()); err != nil && resp.StatusCode == http.StatusOK {
		t.Errorf("answer's signature: %v", err)
	}
	var a gateway.Answer
	if err := json.Unmarshal(answerBody, &a); err != nil || resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("pay: %d %s", resp.StatusCode, answerBody)
	}
	return a, nil
}

// ledger reads GET /ledger.
func (p *process) ledger(t *testing.T) []emulator.Line {
	t.Helper()
	resp, err := http.Get(p.base + "/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("ledger Content-Type %q", ct)
	}
	var lines []emulator.Line
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var l emulator.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

// The real binary: started on a free loopback port, paid once, its ledger
// read, stopped with SIGTERM; the ledger file keeps the payment.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.db")
	const secret = testSecret
	wechatKey := gateway.Key{ID: "wk-2026", Secret: []byte("wechat-own-key-0123456789abcdefghijkl")}
	p := start(t, "-secret", secret, "-ledger", ledger, "-channels", "ALIPAY, WECHAT", "-behaviour", `WECHAT={"declineRate":1}`,
		"-key", "WECHAT="+wechatKey.ID+":"+string(wechatKey.Secret))
	client := &http.Client{Timeout: 5 * time.Second}
	// WECHAT has its own key (-key): the shared -secret is refused there.
	if _, err := p.pay(t, client, secret, "WECHAT", gateway.PayRequest{OrderNo: "w-1", RequestID: "w-1", MerchantID: "M", Amount: 1, Currency: "CNY"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("WECHAT paid under the shared secret: %v, want 401", err)
	}
	if a, err := p.payWith(t, client, wechatKey, "WECHAT", gateway.PayRequest{OrderNo: "w-2", RequestID: "w-2", MerchantID: "M", Amount: 1, Currency: "CNY"}); err != nil || a.Outcome != gateway.Declined {
		t.Errorf("WECHAT under its own key: %+v %v, want DECLINED (its behaviour)", a, err)
	}
	answer, err := p.pay(t, client, secret, "ALIPAY", gateway.PayRequest{OrderNo: "o-1", RequestID: "r-1", MerchantID: "M", Amount: 990, Currency: "CNY"})
	if err != nil || answer.Outcome != gateway.Succeeded {
		t.Fatalf("pay: %+v %v", answer, err)
	}
	lines := p.ledger(t)[2:] // after WECHAT's two
	want := emulator.Line{Seq: 3, Op: emulator.OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "r-1", Amount: 990, Currency: "CNY", Outcome: gateway.Succeeded, MoneyMoved: true, TradeNo: answer.TradeNo}
	if len(lines) == 1 {
		want.ReceivedAtUs = lines[0].ReceivedAtUs
	}
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("ledger %+v, want [%+v]", lines, want)
	}
	resp, err := client.Get(p.base + "/admin/channels/WECHAT")
	if err != nil {
		t.Fatal(err)
	}
	adminBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(adminBody), `"declineRate":1`) {
		t.Errorf("WECHAT's behaviour %s, want the -behaviour flag's declineRate", adminBody)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, p.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the emulator did not stop on SIGTERM")
	}
	if strings.Contains(p.logs.String(), secret) || strings.Contains(p.logs.String(), string(wechatKey.Secret)) {
		t.Error("the log carries a secret")
	}
	store, err := emulator.OpenStore(context.Background(), ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if o, ok := store.Order("ALIPAY", "o-1"); !ok || o.TradeNo != answer.TradeNo {
		t.Errorf("order in the file after the stop: %+v %v", o, ok)
	}
}

// Killed (-9) while it holds a lost answer: the payment it decided is in
// the books, and the restarted emulator replays it.
func TestBinaryKilledMidCall(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "ledger.db")
	const secret = testSecret
	p := start(t, "-secret", secret, "-ledger", ledger, "-behaviour", `ALIPAY={"lostAnswerRate":1,"holdMs":60000}`)
	req := gateway.PayRequest{OrderNo: "o-1", RequestID: "r-1", MerchantID: "M", Amount: 5, Currency: "USD"}
	called := make(chan error, 1)
	go func() {
		_, err := p.pay(t, &http.Client{Timeout: 30 * time.Second}, secret, "ALIPAY", req)
		called <- err
	}()
	var lines []emulator.Line
	for deadline := time.Now().Add(10 * time.Second); len(lines) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held call never reached the ledger")
		}
		lines = p.ledger(t)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if err := <-called; err == nil {
		t.Fatal("the held call was answered")
	}

	p2 := start(t, "-secret", secret, "-ledger", ledger)
	after := p2.ledger(t)
	if len(after) != 1 || after[0] != lines[0] || !after[0].MoneyMoved || after[0].Fault != emulator.FaultLostAnswer {
		t.Fatalf("ledger after the kill %+v, want the decided payment %+v", after, lines[0])
	}
	a, err := p2.pay(t, &http.Client{Timeout: 5 * time.Second}, secret, "ALIPAY", req)
	if err != nil || a.Outcome != gateway.Succeeded || a.TradeNo != lines[0].TradeNo {
		t.Errorf("replay after the restart: %+v %v, want SUCCEEDED %s", a, err, lines[0].TradeNo)
	}
}
