package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
)

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no secret", []string{"-addr", "127.0.0.1:0"}, 2, "-secret is required"},
		{"not loopback", []string{"-secret", "s", "-addr", "0.0.0.0:0", "-ledger", filepath.Join(t.TempDir(), "l.db")}, 1, "not a loopback address"},
		{"bad behaviour", []string{"-secret", "s", "-behaviour", `ALIPAY={"dropRate":7}`}, 2, "dropRate"},
		{"bad level", []string{"-secret", "s", "-log-level", "loud"}, 2, "-log-level"},
		{"unknown channel behaviour", []string{"-secret", "s", "-addr", "127.0.0.1:0", "-ledger", filepath.Join(t.TempDir(), "l.db"), "-channels", "ALIPAY", "-behaviour", `WECHAT={}`}, 1, "WECHAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// The real binary: built, started on a free loopback port, paid once, its
// ledger read, stopped with SIGTERM; the ledger file keeps the payment.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "channel-emulator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ledger := filepath.Join(dir, "ledger.db")
	const secret = "binary-test-secret"
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-secret", secret, "-ledger", ledger, "-channels", "ALIPAY,WECHAT", "-behaviour", `WECHAT={"declineRate":1}`)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var logs bytes.Buffer
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("the emulator did not say where it listens")
	}

	client := &http.Client{Timeout: 5 * time.Second}
	body, _ := json.Marshal(gateway.PayRequest{OrderNo: "o-1", RequestID: "r-1", MerchantID: "M", Amount: 990, Currency: "CNY"})
	req, _ := http.NewRequest(http.MethodPost, base+"/ALIPAY"+gateway.PathPay, bytes.NewReader(body))
	gateway.Sign(req.Header, []byte(secret), body, time.Now())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answerBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := gateway.Verify(resp.Header, []byte(secret), answerBody, time.Now()); err != nil {
		t.Errorf("answer's signature: %v", err)
	}
	var answer gateway.Answer
	if err := json.Unmarshal(answerBody, &answer); err != nil || answer.Outcome != gateway.Succeeded {
		t.Fatalf("pay: %d %s", resp.StatusCode, answerBody)
	}

	resp, err = client.Get(base + "/ledger")
	if err != nil {
		t.Fatal(err)
	}
	ledgerBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var line emulator.Line
	if err := json.Unmarshal(bytes.TrimSpace(ledgerBody), &line); err != nil {
		t.Fatalf("ledger %q: %v", ledgerBody, err)
	}
	want := emulator.Line{Seq: 1, Op: emulator.OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "r-1", Amount: 990, Currency: "CNY", ReceivedAtUs: line.ReceivedAtUs, Outcome: gateway.Succeeded, MoneyMoved: true, TradeNo: answer.TradeNo}
	if line != want || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("ledger line %+v (%s), want %+v", line, resp.Header.Get("Content-Type"), want)
	}
	resp, err = client.Get(base + "/admin/channels/WECHAT")
	if err != nil {
		t.Fatal(err)
	}
	adminBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(adminBody), `"declineRate":1`) {
		t.Errorf("WECHAT's behaviour %s, want the -behaviour flag's declineRate", adminBody)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-logged; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the emulator did not stop on SIGTERM")
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the log carries the secret")
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
