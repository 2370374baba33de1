package integration

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// browser drives one headless Chromium over the DevTools protocol on a
// pipe (--remote-debugging-pipe: the browser reads commands on fd 3 and
// writes answers and events on fd 4, each a JSON text ended by NUL), so a
// test can fill a form, follow the navigation it causes, read the
// browser's cookie jar and measure the laid-out page, with no library.
type browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	in      *os.File // commands to the browser
	session string   // the page's flat session id

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpMessage
	events  chan cdpMessage
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// startBrowser starts headless Chromium with a width×height viewport and
// one blank page, stopped at the end of the test.
func startBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	bin := chromium(t)
	cmdIn, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, cmdOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), fmt.Sprintf("--window-size=%d,%d", width, height), "--remote-debugging-pipe", "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.ExtraFiles = []*os.File{cmdIn, cmdOut}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("chromium: %v", err)
	}
	cmdIn.Close()
	cmdOut.Close()
	b := &browser{t: t, cmd: cmd, in: in, waiting: map[int]chan cdpMessage{}, events: make(chan cdpMessage, 256)}
	go b.read(out)
	t.Cleanup(func() {
		in.Close()
		cancel()
		_ = cmd.Wait()
		out.Close()
	})
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	b.do("Page.enable", nil, nil)
	b.do("Network.enable", nil, nil)
	b.do("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

func (b *browser) read(out *os.File) {
	r := bufio.NewReader(out)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			close(b.events)
			b.mu.Lock()
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID == 0 {
			select {
			case b.events <- m:
			default: // nobody waits for this many events
			}
			continue
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends one command to session ("" is the browser) and decodes its
// result into result (when not nil).
func (b *browser) call(session, method string, params, result any) {
	b.t.Helper()
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params, "sessionId": session})
	if err != nil {
		b.t.Fatal(err)
	}
	if session == "" {
		msg, _ = json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	}
	if _, err := b.in.Write(append(msg, 0)); err != nil {
		b.t.Fatalf("chromium %s: %v", method, err)
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			b.t.Fatalf("chromium %s: the browser went away", method)
		case m.Error != nil:
			b.t.Fatalf("chromium %s: %s", method, m.Error.Message)
		case result != nil:
			if err := json.Unmarshal(m.Result, result); err != nil {
				b.t.Fatalf("chromium %s: %v", method, err)
			}
		}
	case <-time.After(30 * time.Second):
		b.t.Fatalf("chromium %s: no answer in 30s", method)
	}
}

// do sends one command to the page.
func (b *browser) do(method string, params, result any) {
	b.t.Helper()
	b.call(b.session, method, params, result)
}

// navigate loads url and waits for its load event.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.drainEvents()
	b.do("Page.navigate", map[string]any{"url": url}, nil)
	b.waitLoad()
}

// drainEvents drops the events received so far.
func (b *browser) drainEvents() {
	for {
		select {
		case <-b.events:
		default:
			return
		}
	}
}

// waitLoad waits for the page's next load event (after a navigation, or
// after a form was submitted).
func (b *browser) waitLoad() {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-b.events:
			if !ok {
				b.t.Fatal("chromium went away")
			}
			if m.Method == "Page.loadEventFired" && m.SessionID == b.session {
				return
			}
		case <-deadline:
			b.t.Fatal("chromium: the page did not load in 30s")
		}
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value (JSON-serialisable) into result.
func (b *browser) eval(expr string, result any) {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.do("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if r.ExceptionDetails != nil {
		b.t.Fatalf("javascript %q: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if result != nil {
		if err := json.Unmarshal(r.Result.Value, result); err != nil {
			b.t.Fatalf("javascript %q: %v (%s)", expr, err, r.Result.Value)
		}
	}
}

// text returns the page's visible text.
func (b *browser) text() string {
	b.t.Helper()
	var s string
	b.eval("document.body.innerText", &s)
	return s
}

// browserCookie is a cookie in the browser's jar.
type browserCookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	HTTPOnly bool   `json:"httpOnly"`
	Secure   bool   `json:"secure"`
	SameSite string `json:"sameSite"`
	Path     string `json:"path"`
}

// cookies returns the cookies the browser would send to url.
func (b *browser) cookies(url string) []browserCookie {
	b.t.Helper()
	var r struct {
		Cookies []browserCookie `json:"cookies"`
	}
	b.do("Network.getCookies", map[string]any{"urls": []string{url}}, &r)
	return r.Cookies
}

// screenshot saves the whole page (beyond the viewport) as a PNG under
// integration/testdata/out and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	var r struct {
		Data string `json:"data"`
	}
	b.do("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "out"))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return strings.ReplaceAll(string(q), "\u2028", `\u2028`)
}
