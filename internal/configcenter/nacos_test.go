package configcenter

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

// Integration tests against a real r-nacos server. The address comes from
// PAYSERVER_TEST_NACOS_ADDR (host:HTTP-port; gRPC is port+1000), as the
// testenv command sets it (make test). Without it the tests skip, except under CI=true
// where a missing service is a failure. TestNacosSourceServerRestart runs
// its own r-nacos (internal/testenv).

const nacosTestGroup = "PAY_TEST"

// nacosTestAddr returns the test server address or skips (fails under CI).
func nacosTestAddr(t testing.TB) string {
	t.Helper()
	return testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
}

// nacosTestLogger writes to stderr (not t.Log: the SDK logger is a process
// global that outlives each test) at warn level unless overridden by
// PAYSERVER_TEST_LOG_LEVEL.
func nacosTestLogger() (*slog.Logger, slog.Level) {
	lvl := slog.LevelWarn
	if v := os.Getenv("PAYSERVER_TEST_LOG_LEVEL"); v != "" {
		_ = lvl.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), lvl
}

var nacosBadChars = regexp.MustCompile(`[^a-zA-Z0-9._:-]+`)

// nacosTestDataID returns a dataId unique to this test run.
func nacosTestDataID(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return nacosBadChars.ReplaceAllString(t.Name(), "-") + "-" + hex.EncodeToString(b[:])
}

func nacosTestOptions(t testing.TB, addr, dataID string) NacosOptions {
	l, lvl := nacosTestLogger()
	dir := t.TempDir()
	return NacosOptions{
		Addrs:          []string{addr},
		Group:          nacosTestGroup,
		DataID:         dataID,
		CacheDir:       filepath.Join(dir, "cache"),
		LogDir:         filepath.Join(dir, "log"),
		Logger:         l,
		LogLevel:       lvl,
		ReReadInterval: -1, // tests of the listener path run without the safety net
	}
}

var nacosHTTP = &http.Client{Timeout: 5 * time.Second}

// nacosHTTPPublish publishes through the Nacos v1 OpenAPI, like an operator
// using the console or curl would.
func nacosHTTPPublish(t testing.TB, addr, dataID, content string) {
	t.Helper()
	if err := nacosHTTPPublishErr(addr, dataID, content); err != nil {
		t.Fatalf("publish %s via HTTP: %v", dataID, err)
	}
}

func nacosHTTPPublishErr(addr, dataID, content string) error {
	form := url.Values{"dataId": {dataID}, "group": {nacosTestGroup}, "content": {content}, "tenant": {""}}
	resp, err := nacosHTTP.PostForm("http://"+addr+"/nacos/v1/cs/configs", form)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "true" {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

func nacosHTTPDelete(t testing.TB, addr, dataID string) {
	t.Helper()
	q := url.Values{"dataId": {dataID}, "group": {nacosTestGroup}, "tenant": {""}}
	req, err := http.NewRequest(http.MethodDelete, "http://"+addr+"/nacos/v1/cs/configs?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := nacosHTTP.Do(req)
	if err != nil {
		t.Fatalf("delete %s via HTTP: %v", dataID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete %s via HTTP: status %d: %s", dataID, resp.StatusCode, body)
	}
}

// nacosRecorder is a sink that records deliveries and detects concurrent
// calls.
type nacosRecorder struct {
	inflight atomic.Int32
	overlaps atomic.Int32

	mu   sync.Mutex
	docs []Document
}

func (r *nacosRecorder) sink(d Document) {
	if r.inflight.Add(1) > 1 {
		r.overlaps.Add(1)
	}
	// Widen the window in which a concurrent call would be detected.
	time.Sleep(2 * time.Millisecond)
	r.mu.Lock()
	r.docs = append(r.docs, d)
	r.mu.Unlock()
	r.inflight.Add(-1)
}

func (r *nacosRecorder) all() []Document {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Document(nil), r.docs...)
}

func (r *nacosRecorder) last() (Document, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.docs) == 0 {
		return Document{}, false
	}
	return r.docs[len(r.docs)-1], true
}

// waitLast waits until the latest delivered document satisfies ok.
func (r *nacosRecorder) waitLast(t testing.TB, timeout time.Duration, what string, ok func(Document) bool) Document {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if d, have := r.last(); have && ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; deliveries: %s", timeout, what, r.summary())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *nacosRecorder) summary() string {
	var b strings.Builder
	for i, d := range r.all() {
		c := string(d.Content)
		if len(c) > 40 {
			c = c[:40] + "..."
		}
		fmt.Fprintf(&b, "\n  #%d deleted=%v md5=%s content=%q", i, d.Deleted, d.MD5, c)
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}

// check asserts the guarantees every delivery sequence must satisfy.
func (r *nacosRecorder) check(t testing.TB, name string) {
	t.Helper()
	if n := r.overlaps.Load(); n != 0 {
		t.Errorf("sink called concurrently %d times", n)
	}
	docs := r.all()
	for i, d := range docs {
		sum := md5.Sum(d.Content)
		if d.MD5 != hex.EncodeToString(sum[:]) {
			t.Errorf("#%d: MD5 %s does not match content", i, d.MD5)
		}
		if d.Source != "nacos" || d.Name != name {
			t.Errorf("#%d: Source/Name = %q/%q, want nacos/%s", i, d.Source, d.Name, name)
		}
		if d.Deleted != (len(d.Content) == 0) {
			t.Errorf("#%d: Deleted=%v with %d content bytes", i, d.Deleted, len(d.Content))
		}
		if i > 0 && docs[i-1].MD5 == d.MD5 {
			t.Errorf("#%d: same MD5 %s delivered twice in a row", i, d.MD5)
		}
	}
}

func isContent(want string) func(Document) bool {
	return func(d Document) bool { return !d.Deleted && string(d.Content) == want }
}

// runNacos starts s.Run in the background; the returned stop cancels it and
// asserts that Run returned nil promptly. stop is also registered as a
// cleanup and is idempotent.
func runNacos(t testing.TB, s *NacosSource, rec *nacosRecorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, rec.sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return within 10s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newTestNacosSource(t testing.TB, opts NacosOptions) *NacosSource {
	t.Helper()
	s, err := NewNacosSource(opts)
	if err != nil {
		t.Fatalf("NewNacosSource: %v", err)
	}
	return s
}

func TestNacosOptionsValidation(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	good := NacosOptions{Addrs: []string{"127.0.0.1:18848"}, CacheDir: filepath.Join(dir, "c"), LogDir: filepath.Join(dir, "l")}
	s, err := NewNacosSource(good)
	if err != nil {
		t.Fatalf("good options refused: %v", err)
	}
	if got, want := s.Describe(), "nacos PAY_GROUP/payserver-channel-limits @127.0.0.1:18848"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}

	withPass := good
	withPass.Username, withPass.Password = "nacos", "s3cret-pw"
	withPass.Namespace = "prod"
	s, err = NewNacosSource(withPass)
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Describe(); strings.Contains(d, "s3cret") || !strings.Contains(d, "prod") {
		t.Errorf("Describe() = %q: must name the namespace and never the password", d)
	}

	bad := map[string]func(o *NacosOptions){
		"no addrs":          func(o *NacosOptions) { o.Addrs = nil },
		"no port":           func(o *NacosOptions) { o.Addrs = []string{"127.0.0.1"} },
		"port too high":     func(o *NacosOptions) { o.Addrs = []string{"127.0.0.1:65000"} },
		"no host":           func(o *NacosOptions) { o.Addrs = []string{":18848"} },
		"no cache dir":      func(o *NacosOptions) { o.CacheDir = "" },
		"no log dir":        func(o *NacosOptions) { o.LogDir = " " },
		"cache dir is cwd":  func(o *NacosOptions) { o.CacheDir = wd },
		"log dir is dot":    func(o *NacosOptions) { o.LogDir = "." },
		"bad dataId":        func(o *NacosOptions) { o.DataID = "a/b" },
		"bad group":         func(o *NacosOptions) { o.Group = "g h" },
		"password, no user": func(o *NacosOptions) { o.Password = "x" },
	}
	for name, mut := range bad {
		o := good
		mut(&o)
		if _, err := NewNacosSource(o); err == nil {
			t.Errorf("%s: NewNacosSource accepted %+v", name, o)
		}
	}
}

func TestNacosSDKLoggerRedacts(t *testing.T) {
	var buf bytes.Buffer
	a := newSlogNacosLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelInfo)
	a.addSecret("hunter2-pw")
	a.Errorf("Send request fail, body=%s", `{"headers":{"accessToken":"tok-123","x":"y"},"content":"limits"}`)
	a.Info("login form username=nacos&password=hunter2-pw&x=1")
	a.Warnf("echo %s", "hunter2-pw")
	a.Debug("below min level")
	out := buf.String()
	for _, leak := range []string{"hunter2-pw", "tok-123", "below min level"} {
		if strings.Contains(out, leak) {
			t.Errorf("log output contains %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"level=ERROR", "level=INFO", "level=WARN", "limits", "REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}
}

// With neither server nor snapshot, Run delivers nothing, keeps running and
// returns nil when cancelled.
func TestNacosSourceNoServerNoSnapshot(t *testing.T) {
	p := testenv.FreePort(t, 1000)
	opts := nacosTestOptions(t, "127.0.0.1:"+strconv.Itoa(p), nacosTestDataID(t))
	opts.ReReadInterval = 500 * time.Millisecond
	s := newTestNacosSource(t, opts)
	rec := &nacosRecorder{}
	stop := runNacos(t, s, rec)
	time.Sleep(nacosStartBudget + 500*time.Millisecond) // past the snapshot fallback
	if docs := rec.all(); len(docs) != 0 {
		t.Fatalf("delivered %d documents without server or snapshot: %s", len(docs), rec.summary())
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to return after cancel", d)
	}
	if err := s.Publish(context.Background(), "x"); !errors.Is(err, ErrNacosSourceClosed) {
		t.Errorf("Publish after Run returned: err = %v, want ErrNacosSourceClosed", err)
	}
}

func TestNacosSourceInitialRead(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	content := "channels:\n  alipay: {qps: 10}\n# " + dataID + "\n"
	nacosHTTPPublish(t, addr, dataID, content)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	rec := &nacosRecorder{}
	start := time.Now()
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "initial document", isContent(content))
	t.Logf("initial document after %v", time.Since(start))
	rec.check(t, nacosTestGroup+"/"+dataID)
}

func TestNacosSourceLiveChangeHTTP(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, addr, dataID, "v1 "+dataID)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	s.settleFor = 0 // only the listener may deliver v2
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v1", isContent("v1 "+dataID))

	start := time.Now()
	nacosHTTPPublish(t, addr, dataID, "v2 "+dataID)
	rec.waitLast(t, 8*time.Second, "v2 via listener", isContent("v2 "+dataID))
	t.Logf("change arrived after %v (re-read disabled: listener path)", time.Since(start))
	rec.check(t, nacosTestGroup+"/"+dataID)
}

func TestNacosSourcePublishViaSDK(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, addr, dataID, "v1 "+dataID)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	s.settleFor = 0 // only the listener may deliver v2
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v1", isContent("v1 "+dataID))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Publish(ctx, "v2 via sdk "+dataID); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	rec.waitLast(t, 8*time.Second, "v2 published via SDK", isContent("v2 via sdk "+dataID))
	t.Logf("SDK publish arrived after %v", time.Since(start))
	if err := s.Publish(ctx, ""); err == nil {
		t.Error("Publish accepted empty content")
	}
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// A dataId that does not exist at start, and one that is deleted later,
// are both delivered as Deleted documents; a later publish still arrives.
func TestNacosSourceDeletedAndMissing(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	isDeleted := func(d Document) bool { return d.Deleted && len(d.Content) == 0 }
	rec.waitLast(t, 3*time.Second, "deleted document for a missing dataId", isDeleted)

	nacosHTTPPublish(t, addr, dataID, "v1 "+dataID)
	rec.waitLast(t, 8*time.Second, "v1", isContent("v1 "+dataID))

	nacosHTTPDelete(t, addr, dataID)
	rec.waitLast(t, 8*time.Second, "deleted document after DELETE", isDeleted)

	nacosHTTPPublish(t, addr, dataID, "v2 "+dataID)
	rec.waitLast(t, 8*time.Second, "v2 after re-create", isContent("v2 "+dataID))
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// With the listener disabled, the periodic re-read alone delivers changes:
// this is what keeps limits flowing when the SDK listener goes silent after
// a server restart (nacos-sdk-go issue #694).
func TestNacosSourceReReadWithoutListener(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, addr, dataID, "v1 "+dataID)

	opts := nacosTestOptions(t, addr, dataID)
	opts.ReReadInterval = 300 * time.Millisecond
	s := newTestNacosSource(t, opts)
	s.noListener = true
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v1", isContent("v1 "+dataID))

	start := time.Now()
	nacosHTTPPublish(t, addr, dataID, "v2 "+dataID)
	rec.waitLast(t, 3*time.Second, "v2 via re-read", isContent("v2 "+dataID))
	t.Logf("change arrived via re-read after %v", time.Since(start))
	time.Sleep(700 * time.Millisecond) // more re-reads of the same version
	if n := len(rec.all()); n != 2 {
		t.Errorf("want 2 deliveries (re-reads of an unchanged version are dropped), got %d: %s", n, rec.summary())
	}
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// nacos-sdk-go loses a push that arrives while its listen loop runs right
// after a change (see nacosSettleFor). With every callback after v2's lost
// and the periodic re-read off, v3, published right after v2 arrived, still
// arrives through the settle reads that v2's callback started, within about
// a second. (The windows of start-up and of v1's callback are over before
// v2 is published, so only v2's callback can have opened a window.)
func TestNacosSourceLostPushAfterChange(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, addr, dataID, "v1 "+dataID)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	s.settleFor, s.settleEvery = 3*time.Second, 300*time.Millisecond
	var lose atomic.Bool
	var callbacks atomic.Int64
	s.loseCallback = func() bool {
		callbacks.Add(1)
		return lose.Load()
	}
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v1", isContent("v1 "+dataID))
	// A fresh cache starts the SDK's listener from an empty MD5, so v1 has
	// a callback of its own, which opens a window too.
	for deadline := time.Now().Add(8 * time.Second); callbacks.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no listener callback for v1 within 8s")
		}
	}
	time.Sleep(s.settleFor + s.settleEvery) // those windows close
	nacosHTTPPublish(t, addr, dataID, "v2 "+dataID)
	rec.waitLast(t, 8*time.Second, "v2", isContent("v2 "+dataID))
	// Reads already requested for v2 (a callback can come twice) finish
	// first, so that only a later read can see v3.
	time.Sleep(3 * nacosMinReadGap)

	lose.Store(true)
	start := time.Now()
	nacosHTTPPublish(t, addr, dataID, "v3 "+dataID)
	rec.waitLast(t, 2*time.Second, "v3, whose push was lost", isContent("v3 "+dataID))
	t.Logf("v3 arrived %v after its publish, with its push lost", time.Since(start))
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// Rapid concurrent publishes end with the last content delivered, with the
// sink never called concurrently and no MD5 delivered twice in a row.
func TestNacosSourceConcurrentPublishes(t *testing.T) {
	addr := nacosTestAddr(t)
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, addr, dataID, "v0 "+dataID)

	s := newTestNacosSource(t, nacosTestOptions(t, addr, dataID))
	rec := &nacosRecorder{}
	runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v0", isContent("v0 "+dataID))

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := nacosHTTPPublishErr(addr, dataID, fmt.Sprintf("w%d-%d %s", w, i, dataID)); err != nil {
					errs <- err
				}
				// Spread the writes so listener callbacks and reads
				// interleave with them.
				time.Sleep(time.Duration(5+(w*7+i*3)%20) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent publish: %v", err)
	}
	final := "final " + dataID
	nacosHTTPPublish(t, addr, dataID, final)
	rec.waitLast(t, 10*time.Second, "final content", isContent(final))
	// Nothing older may follow the final version.
	time.Sleep(500 * time.Millisecond)
	if d, _ := rec.last(); string(d.Content) != final {
		t.Fatalf("an older version was delivered after the final one: %s", rec.summary())
	}
	t.Logf("%d deliveries for 42 publishes", len(rec.all()))
	if len(rec.all()) < 2 {
		t.Errorf("want at least v0 and the final version delivered: %s", rec.summary())
	}
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// seedNacosSnapshot publishes a document, runs a source until it is
// delivered, and stops it, leaving the SDK's snapshot in opts.CacheDir.
func seedNacosSnapshot(t *testing.T) (opts NacosOptions, dataID, content string) {
	t.Helper()
	addr := nacosTestAddr(t)
	dataID = nacosTestDataID(t)
	content = "snapshot me " + dataID
	nacosHTTPPublish(t, addr, dataID, content)
	opts = nacosTestOptions(t, addr, dataID)
	rec := &nacosRecorder{}
	stop := runNacos(t, newTestNacosSource(t, opts), rec)
	rec.waitLast(t, 3*time.Second, "document from the server", isContent(content))
	stop()
	return opts, dataID, content
}

// A restart during a Nacos outage delivers the snapshot a previous run left
// in CacheDir within 3 s.
func TestNacosSourceSnapshotWhenServerDown(t *testing.T) {
	opts, dataID, content := seedNacosSnapshot(t)

	p := testenv.FreePort(t, 1000)
	opts.Addrs = []string{"127.0.0.1:" + strconv.Itoa(p)}
	opts.ReReadInterval = 500 * time.Millisecond
	second := newTestNacosSource(t, opts)
	rec2 := &nacosRecorder{}
	start := time.Now()
	runNacos(t, second, rec2)
	rec2.waitLast(t, 3*time.Second, "snapshot with the server unreachable", isContent(content))
	t.Logf("snapshot delivered after %v with the server unreachable", time.Since(start))
	time.Sleep(1200 * time.Millisecond) // a couple of failing re-reads
	if n := len(rec2.all()); n != 1 {
		t.Errorf("want exactly one delivery while the server is down, got %d: %s", n, rec2.summary())
	}
	rec2.check(t, nacosTestGroup+"/"+dataID)
}

// When the server does not answer at all (here: the SDK's synchronous
// login hangs on a black-holed HTTP port), Run still delivers the snapshot
// within 3 s by reading it itself.
func TestNacosSourceSnapshotWhenServerHangs(t *testing.T) {
	opts, dataID, content := seedNacosSnapshot(t)

	// HTTP port black-holed, gRPC port (+1000) closed.
	hole := blackHole(t)
	opts.Addrs = []string{"127.0.0.1:" + strconv.Itoa(hole)}
	opts.Username, opts.Password = "payserver", "hunter2-test-pw"
	opts.TimeoutMs = 2500 // the login hangs this long, past Run's 2 s start budget
	second := newTestNacosSource(t, opts)
	rec2 := &nacosRecorder{}
	start := time.Now()
	runNacos(t, second, rec2)
	rec2.waitLast(t, 3*time.Second, "snapshot with the server hanging", isContent(content))
	if d := time.Since(start); d < nacosStartBudget-100*time.Millisecond {
		t.Errorf("snapshot after %v: expected Run's own snapshot read at ~%v (did the login not hang?)", d, nacosStartBudget)
	}
	t.Logf("snapshot delivered after %v with the server hanging", time.Since(start))
	rec2.check(t, nacosTestGroup+"/"+dataID)
}

// blackHole listens on a loopback port p, with nothing listening on p+1000,
// accepts connections and never answers; it returns p.
func blackHole(t testing.TB) int {
	t.Helper()
	var l net.Listener
	for {
		p := testenv.FreePort(t, 1000)
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			break
		}
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

const (
	nacosRestartChildEnv = "PAYSERVER_NACOS_RESTART_CHILD"
	nacosRestartOK       = "NACOS-RESTART-SCENARIO-OK"
)

// After the server is killed and restarted, changes published after the
// restart still arrive (the periodic re-read covers listeners that went
// silent, nacos-sdk-go issue #694), and the outage itself delivers nothing.
//
// The scenario runs in a child process (TestNacosServerRestartScenario in
// this test binary). nacos-sdk-go v2.3.5 has known data races in its gRPC
// reconnect path (RpcClient.currentConnection and rpcClientStatus, issues
// #833/#905/#908, fixed upstream but unreleased) that every server restart
// triggers, so under -race the child's own test always fails. The parent
// therefore requires the child's success marker and then classifies each
// race report: a race whose racing access is in this package fails the
// test; a race entirely inside the SDK is logged.
func TestNacosSourceServerRestart(t *testing.T) {
	testenv.Binary(t, "rnacos") // skip (or fail under CI) when missing
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNacosServerRestartScenario$", "-test.v=true", "-test.count=1")
	cmd.Env = append(os.Environ(), nacosRestartChildEnv+"=1", "GORACE=halt_on_error=0")
	out, err := cmd.CombinedOutput()
	if !bytes.Contains(out, []byte(nacosRestartOK)) {
		t.Fatalf("restart scenario failed (child err %v):\n%s", err, out)
	}
	ours, sdk := classifyRaces(string(out))
	for _, r := range ours {
		t.Errorf("data race involving payserver code:\n%s", r)
	}
	if len(sdk) > 0 {
		t.Logf("ignored %d data race report(s) inside nacos-sdk-go v2.3.5 (known: issues #833/#905/#908)", len(sdk))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "nacos_test.go") && strings.Contains(line, "after") {
			t.Log("child:", strings.TrimSpace(line))
		}
	}
}

// classifyRaces splits race detector reports into those whose racing
// accesses touch this module's code and those confined to dependencies.
func classifyRaces(out string) (ours, deps []string) {
	for _, block := range strings.Split(out, "==================") {
		if !strings.Contains(block, "WARNING: DATA RACE") {
			continue
		}
		if raceTopFrameIsOurs(block) {
			ours = append(ours, block)
		} else {
			deps = append(deps, block)
		}
	}
	return ours, deps
}

var raceAccessRe = regexp.MustCompile(`^(Previous )?(Atomic )?(read|write) at 0x`)

// raceTopFrameIsOurs reports whether the innermost non-runtime frame of
// either racing access is in the payserver module.
func raceTopFrameIsOurs(block string) bool {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if !raceAccessRe.MatchString(strings.ToLower(strings.TrimSpace(l))) {
			continue
		}
		for _, f := range lines[i+1:] {
			if !strings.HasPrefix(f, "  ") || strings.HasPrefix(f, "      ") {
				if strings.TrimSpace(f) == "" {
					break
				}
				continue // file:line lines
			}
			fn := strings.TrimSpace(f)
			if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") ||
				strings.HasPrefix(fn, "sync/atomic.") || strings.HasPrefix(fn, "internal/") {
				continue
			}
			if strings.HasPrefix(fn, "payserver/") {
				return true
			}
			break
		}
	}
	return false
}

// TestNacosServerRestartScenario is the body of TestNacosSourceServerRestart;
// it runs only in the child process that test starts.
func TestNacosServerRestartScenario(t *testing.T) {
	if os.Getenv(nacosRestartChildEnv) != "1" {
		t.Skip("runs only as the child process of TestNacosSourceServerRestart")
	}
	// Under -race, t.Failed() also reports the SDK's races; track the
	// scenario's own failures separately for the success marker.
	ft := &failTracker{TB: t}
	nacosRestartScenario(ft)
	if !ft.failed.Load() {
		fmt.Println(nacosRestartOK)
	}
}

func nacosRestartScenario(t testing.TB) {
	srv := testenv.StartNacos(t, testenv.NacosOptions{}).Nodes[0]
	dataID := nacosTestDataID(t)
	nacosHTTPPublish(t, srv.Addr, dataID, "v1 "+dataID)

	opts := nacosTestOptions(t, srv.Addr, dataID)
	opts.ReReadInterval = time.Second
	s := newTestNacosSource(t, opts)
	rec := &nacosRecorder{}
	stop := runNacos(t, s, rec)
	rec.waitLast(t, 3*time.Second, "v1", isContent("v1 "+dataID))

	srv.Kill()
	time.Sleep(1500 * time.Millisecond) // a re-read fails while the server is down
	srv.Start()
	start := time.Now()
	nacosHTTPPublish(t, srv.Addr, dataID, "v2 "+dataID)
	rec.waitLast(t, 10*time.Second, "v2 published after the restart", isContent("v2 "+dataID))
	t.Logf("post-restart change arrived after %v", time.Since(start))
	stop()
	for i, d := range rec.all() {
		if c := string(d.Content); c != "v1 "+dataID && c != "v2 "+dataID {
			t.Errorf("#%d: unexpected delivery around the outage: deleted=%v content=%q", i, d.Deleted, c)
		}
	}
	rec.check(t, nacosTestGroup+"/"+dataID)
}

// failTracker records whether the test itself reported a failure.
type failTracker struct {
	testing.TB
	failed atomic.Bool
}

func (f *failTracker) Error(args ...any) {
	f.TB.Helper()
	f.failed.Store(true)
	f.TB.Error(args...)
}

func (f *failTracker) Errorf(format string, args ...any) {
	f.TB.Helper()
	f.failed.Store(true)
	f.TB.Errorf(format, args...)
}

func (f *failTracker) Fatal(args ...any) {
	f.TB.Helper()
	f.failed.Store(true)
	f.TB.Fatal(args...)
}

func (f *failTracker) Fatalf(format string, args ...any) {
	f.TB.Helper()
	f.failed.Store(true)
	f.TB.Fatalf(format, args...)
}

func (f *failTracker) Fail() {
	f.failed.Store(true)
	f.TB.Fail()
}

func (f *failTracker) FailNow() {
	f.failed.Store(true)
	f.TB.FailNow()
}

func TestNacosRaceClassifier(t *testing.T) {
	sdk := `==================
WARNING: DATA RACE
Read at 0x00c000341138 by goroutine 24:
  github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc.(*RpcClient).notifyConnectionEvent()
      /x/rpc_client.go:487 +0xf7

Previous write at 0x00c000341138 by goroutine 25:
  github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc.(*RpcClient).reconnect()
      /x/rpc_client.go:449 +0xd26

Goroutine 24 (running) created at:
  payserver/internal/configcenter.(*NacosSource).reader()
      /x/nacos.go:521 +0x2bb
==================
`
	ours := `==================
WARNING: DATA RACE
Write at 0x00c000341138 by goroutine 7:
  sync/atomic.AddInt32()
      /usr/local/go/src/runtime/race_amd64.s:1 +0x1
  payserver/internal/configcenter.(*NacosSource).Run.func2()
      /x/nacos.go:400 +0x10

Previous read at 0x00c000341138 by goroutine 8:
  github.com/nacos-group/nacos-sdk-go/v2/clients/config_client.(*cacheData).executeListener.gowrap1()
      /x/config_client.go:101 +0x1
==================
`
	o, d := classifyRaces("PASS\n" + sdk + "\nsome output\n" + ours)
	if len(o) != 1 || len(d) != 1 || !strings.Contains(o[0], "Run.func2") {
		t.Fatalf("classifyRaces: ours=%d deps=%d", len(o), len(d))
	}
}
