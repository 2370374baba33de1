package configcenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/cache"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// Defaults applied by NewNacosSource to zero-valued NacosOptions fields.
const (
	DefaultNacosGroup          = "PAY_GROUP"
	DefaultNacosDataID         = "payserver-channel-limits"
	DefaultNacosReReadInterval = 30 * time.Second
	DefaultNacosTimeoutMs      = 3000
)

// nacosStartBudget bounds how long Run waits for the first answer from the
// SDK (server or the SDK's own snapshot fallback) before it reads the local
// snapshot itself, so that a snapshot is delivered within 3 s of Run
// starting even when the server is unreachable in a slow way (a black-holed
// address, a hanging login).
const nacosStartBudget = 2 * time.Second

// nacosMinReadGap spaces consecutive GetConfig calls. The SDK rate-limits
// queries per dataId (5/s, shared with its own listener refreshes) and
// silently falls back to the snapshot when limited.
const nacosMinReadGap = 200 * time.Millisecond

// nacosSettleFor and nacosSettleEvery: for nacosSettleFor after each
// listener callback (and after the initial read), the reader reads again
// whenever nacosSettleEvery has passed without a read. nacos-sdk-go v2.3.5
// loses a server push that arrives while its listen loop has a batch-listen
// request in flight: the push handler marks the dataId unsynced, and the
// loop then marks every dataId the server's answer (given before the
// publish) did not name as synced, overwriting that mark. Such a loop runs right
// after every change the SDK delivers, so a change published within a few
// hundred milliseconds of another one (or of start-up) is otherwise seen
// only by the periodic re-read or the SDK's own full sync 5 minutes later.
// A listen request times out after 3 s, so 5 s covers the loop's window;
// at most 2 extra reads a second stay within the SDK's 5 queries a second.
// Two windows are not covered and wait for the periodic re-read: a
// follow-up listen that failed and is retried 5 s later, and the SDK's
// full sync every 5 minutes.
const (
	nacosSettleFor   = 5 * time.Second
	nacosSettleEvery = 500 * time.Millisecond
)

// nacosCloseGrace is how long Close waits between cancelling the listener
// and shutting the SDK client down. nacos-sdk-go v2.3.5's
// RpcClient.Shutdown deletes from the SDK's global client map without the
// lock its listen loop takes to read that map; a listen round already
// running when the listener is cancelled (up to ~300 ms against a refused
// port, milliseconds against a live server) is let finish first. A round
// blocked longer (an unresponsive server) can still overlap; that race is
// inside the SDK.
const nacosCloseGrace = 500 * time.Millisecond

// ErrNacosSourceClosed is returned by Publish and Run once the source has
// been closed (Run closes it when it returns).
var ErrNacosSourceClosed = errors.New("configcenter: nacos source is closed")

// NacosOptions configures a NacosSource. Zero values take the documented
// defaults; CacheDir and LogDir are required.
type NacosOptions struct {
	// Addrs lists host:port of each Nacos server's HTTP port. The gRPC port
	// is port+1000, as the SDK assumes.
	Addrs []string
	// Namespace is the Nacos namespace (tenant) ID; "" means public.
	Namespace string
	// Group defaults to DefaultNacosGroup.
	Group string
	// DataID defaults to DefaultNacosDataID.
	DataID string
	// Username and Password enable Nacos auth when Username is set (the SDK
	// logs in over HTTP when the client is created, and refreshes the
	// token). The password is never logged: it is redacted from SDK log
	// lines, as are access tokens.
	Username, Password string
	// CacheDir is the SDK snapshot directory (it writes under
	// CacheDir/config). It is required and must not be the working
	// directory.
	CacheDir string
	// LogDir is the SDK log directory. It is required and must not be the
	// working directory. SDK logs normally go to Logger instead; LogDir is
	// only used if the SDK ever falls back to its own file logger.
	LogDir string
	// Logger receives the source's logs. Nil means slog.Default(). The
	// SDK's own logs are a process-wide hook: they go to the Logger of the
	// first NacosSource that creates its SDK client (see
	// installNacosSDKLogger).
	Logger *slog.Logger
	// LogLevel is the minimum level of SDK logs forwarded to Logger; the
	// service passes its own level. It is also the SDK's ClientConfig
	// LogLevel.
	LogLevel slog.Level
	// ReReadInterval is the period of the safety-net GetConfig re-read
	// (nacos-sdk-go issue #694: listeners may go silent after a server
	// restart). 0 means DefaultNacosReReadInterval; negative disables it.
	ReReadInterval time.Duration
	// TimeoutMs is the SDK request timeout; 0 means DefaultNacosTimeoutMs.
	TimeoutMs uint64
}

// NacosSource is a Source backed by one Nacos dataId, read through one
// nacos-sdk-go config client.
//
// Run delivers documents to its sink from a single goroutine, never
// concurrently, never the same MD5 twice in a row, and only from reads it
// performs itself in order: SDK listener callbacks are used only as triggers
// for a fresh read, so callbacks the SDK delivers concurrently or out of
// order cannot make an older version overwrite a newer one. Nacos is never
// called from the sink, so a request path that only reads what the sink
// stored never waits on Nacos.
//
// A NacosSource is single-use: Run may be called once, and Run closes the
// SDK client when it returns.
type NacosSource struct {
	opts      NacosOptions
	servers   []constant.ServerConfig
	name      string // GROUP/dataId
	describe  string
	log       *slog.Logger
	reRead    time.Duration
	timeoutMs uint64

	// noListener skips ListenConfig so that tests can prove the periodic
	// re-read delivers changes on its own (the nacos-sdk-go #694 case).
	noListener bool
	// settleFor and settleEvery are nacosSettleFor and nacosSettleEvery;
	// tests of the listener and re-read paths set settleFor to 0 so that
	// settle reads cannot deliver for them.
	settleFor, settleEvery time.Duration
	// loseCallback, when set, is asked on each SDK listener callback and
	// drops it when it answers true, so that tests can lose a push the way
	// the SDK's listen loop does (see nacosSettleFor).
	loseCallback func() bool

	running atomic.Bool

	mu        sync.Mutex
	client    config_client.IConfigClient
	listening bool // ListenConfig registered on client
	closed    bool
}

var _ Source = (*NacosSource)(nil)

// NewNacosSource validates opts, applies defaults and returns a source. It
// performs no network I/O; the SDK client is created by Run or Publish.
func NewNacosSource(opts NacosOptions) (*NacosSource, error) {
	servers, err := nacosServerConfigs(opts.Addrs)
	if err != nil {
		return nil, err
	}
	if opts.Group == "" {
		opts.Group = DefaultNacosGroup
	}
	if opts.DataID == "" {
		opts.DataID = DefaultNacosDataID
	}
	if !validNacosName(opts.Group) {
		return nil, fmt.Errorf("configcenter: nacos: invalid group %q (allowed: letters, digits, . _ : -)", opts.Group)
	}
	if !validNacosName(opts.DataID) {
		return nil, fmt.Errorf("configcenter: nacos: invalid dataId %q (allowed: letters, digits, . _ : -)", opts.DataID)
	}
	if opts.Password != "" && opts.Username == "" {
		return nil, errors.New("configcenter: nacos: password set without username")
	}
	if opts.CacheDir, err = checkNacosDir("CacheDir", opts.CacheDir); err != nil {
		return nil, err
	}
	if opts.LogDir, err = checkNacosDir("LogDir", opts.LogDir); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reRead := opts.ReReadInterval
	if reRead == 0 {
		reRead = DefaultNacosReReadInterval
	}
	timeoutMs := opts.TimeoutMs
	if timeoutMs == 0 {
		timeoutMs = DefaultNacosTimeoutMs
	}

	name := opts.Group + "/" + opts.DataID
	desc := "nacos " + name + " @" + strings.Join(opts.Addrs, ",")
	if opts.Namespace != "" {
		desc = "nacos " + opts.Namespace + ":" + name + " @" + strings.Join(opts.Addrs, ",")
	}
	return &NacosSource{
		opts:        opts,
		servers:     servers,
		name:        name,
		describe:    desc,
		log:         opts.Logger.With(slog.String("source", "nacos"), slog.String("config", name)),
		reRead:      reRead,
		timeoutMs:   timeoutMs,
		settleFor:   nacosSettleFor,
		settleEvery: nacosSettleEvery,
	}, nil
}

// nacosServerConfigs parses host:port HTTP addresses into the SDK's server
// configs (gRPC on port+1000). Several addresses make the SDK fail over
// between the nodes of a Nacos cluster.
func nacosServerConfigs(addrs []string) ([]constant.ServerConfig, error) {
	if len(addrs) == 0 {
		return nil, errors.New("configcenter: nacos: at least one server address is required")
	}
	servers := make([]constant.ServerConfig, 0, len(addrs))
	for _, a := range addrs {
		host, portStr, err := net.SplitHostPort(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("configcenter: nacos: bad server address %q: %w", a, err)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || port == 0 || port+constant.RpcPortOffset > 65535 {
			return nil, fmt.Errorf("configcenter: nacos: bad port in %q (need 1..%d so that the gRPC port+%d is valid)",
				a, 65535-constant.RpcPortOffset, constant.RpcPortOffset)
		}
		if host == "" {
			return nil, fmt.Errorf("configcenter: nacos: missing host in %q", a)
		}
		servers = append(servers, constant.ServerConfig{
			Scheme:      "http",
			ContextPath: "/nacos",
			IpAddr:      host,
			Port:        port,
			GrpcPort:    port + constant.RpcPortOffset,
		})
	}
	return servers, nil
}

// validNacosName reports whether s uses only the characters Nacos accepts
// in a dataId or group: ASCII letters, digits and . _ : -.
func validNacosName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}

// checkNacosDir makes dir absolute and refuses an empty value or the
// working directory, where the SDK would otherwise litter cache/ and log/.
func checkNacosDir(field, dir string) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", fmt.Errorf("configcenter: nacos: %s is required", field)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("configcenter: nacos: %s %q: %w", field, dir, err)
	}
	if wd, err := os.Getwd(); err == nil && filepath.Clean(wd) == abs {
		return "", fmt.Errorf("configcenter: nacos: %s must not be the working directory", field)
	}
	return abs, nil
}

// Describe returns "nacos GROUP/dataId @host:port[,host:port...]" (with a
// "namespace:" prefix before the group when a namespace is set). It never
// contains credentials.
func (s *NacosSource) Describe() string { return s.describe }

// sdkClient returns the source's SDK config client, creating it on first
// use. Creation may block on the SDK's synchronous login when a username is
// set. It fails with ErrNacosSourceClosed after Close.
func (s *NacosSource) sdkClient() (config_client.IConfigClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrNacosSourceClosed
	}
	if s.client != nil {
		return s.client, nil
	}
	for _, d := range []string{s.opts.CacheDir, s.opts.LogDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("configcenter: nacos: %w", err)
		}
	}
	installNacosSDKLogger(s.opts.Logger, s.opts.LogLevel, s.opts.Password)
	cc := constant.ClientConfig{
		TimeoutMs:           s.timeoutMs,
		NamespaceId:         s.opts.Namespace,
		CacheDir:            s.opts.CacheDir,
		LogDir:              s.opts.LogDir,
		LogLevel:            nacosSDKLogLevel(s.opts.LogLevel),
		NotLoadCacheAtStart: false,
		DisableUseSnapShot:  false,
		Username:            s.opts.Username,
		Password:            s.opts.Password,
	}
	c, err := newSDKClient(cc, s.servers, clients.NewConfigClient)
	if err != nil {
		return nil, fmt.Errorf("configcenter: nacos: create config client: %w", err)
	}
	s.client = c
	return c, nil
}

// Close shuts the SDK client down. It is meant for a source used only for
// Publish: Run closes the source itself when it returns, and Close must not
// be called while Run is running (cancel Run's context instead). Close is
// idempotent and safe to call concurrently with Publish; after Close,
// Publish and Run fail with ErrNacosSourceClosed. When the source was
// listening, Close takes about half a second (see nacosCloseGrace).
func (s *NacosSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c, listening := s.client, s.listening
	s.client = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	if listening {
		param := vo.ConfigParam{DataId: s.opts.DataID, Group: s.opts.Group}
		_ = c.CancelListenConfig(param)
		time.Sleep(nacosCloseGrace)
		// Taking the SDK's listener-map lock again orders a listen round
		// that finished during the grace before the shutdown below.
		_ = c.CancelListenConfig(param)
	}
	shutdownSDK(c.CloseClient)
	return nil
}

// abandon marks the source closed and cancels its listener without
// shutting the SDK client down.
func (s *NacosSource) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.client != nil && s.listening {
		_ = s.client.CancelListenConfig(vo.ConfigParam{DataId: s.opts.DataID, Group: s.opts.Group})
	}
	s.client = nil
}

// Publish writes content as the current version of the dataId through the
// SDK (PublishConfig over gRPC). It is meant for tests and ops tooling, not
// for the request path. Empty content is refused (Nacos rejects it; delete
// the dataId instead). Publish returns when the server acknowledged the
// write, or with ctx's error when ctx ends first (the SDK call itself is
// bounded by its own 3 s timeout and finishes in the background).
func (s *NacosSource) Publish(ctx context.Context, content string) error {
	if content == "" {
		return errors.New("configcenter: nacos: refusing to publish empty content")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := s.sdkClient()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		ok, err := c.PublishConfig(vo.ConfigParam{DataId: s.opts.DataID, Group: s.opts.Group, Content: content})
		if err == nil && !ok {
			err = errors.New("server did not accept the write")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("configcenter: nacos: publish %s: %w", s.name, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nacosRead is the outcome of one read of the dataId.
type nacosRead struct {
	content string
	err     error
	trigger string // what caused the read: initial, listener or re-read
}

// Run registers a Nacos listener, reads the dataId, delivers it to sink and
// then delivers every change until ctx is done; it then closes the source
// (waiting up to TimeoutMs+1s for an in-flight SDK call) and returns nil.
//
// Guarantees:
//   - sink is called only from Run's goroutine, serially, never
//     concurrently; it must not block for long.
//   - Consecutive deliveries never carry the same MD5: duplicate listener
//     callbacks, re-reads and snapshot reads of an unchanged document are
//     dropped.
//   - Every delivery comes from a read Run performed (GetConfig through the
//     SDK); listener callbacks only trigger such a read, so a late or
//     reordered callback cannot deliver an older version.
//   - A dataId that does not exist (never published, or deleted) is
//     delivered as a Document with Deleted set and no Content, so the
//     caller can refuse, log and count it; the SDK reports it as empty
//     content without an error (server code 300), which is how it is told
//     apart from a failed read. A failed read (server down and no
//     snapshot) delivers nothing. Whitespace-only content is a real
//     version and is delivered as content.
//   - While the server is down the SDK answers reads from its snapshot
//     without reporting an error, so an outage after a successful start
//     shows up only in the SDK's own (error-level) logs; the snapshot is
//     the last version already delivered and is dropped by the MD5 check.
//   - When the server does not answer within about 2 s of Run starting,
//     the SDK snapshot in CacheDir (if any) is delivered, so a restart
//     during a Nacos outage still gets the last known document within 3 s.
//     Run keeps trying in the background (the SDK reconnects by itself) and
//     logs the outage once at warn level.
//   - Every ReReadInterval the dataId is re-read through the same path, so
//     changes still arrive when the SDK listener goes silent after a server
//     restart (nacos-sdk-go issue #694).
//
// Run returns an error without delivering anything when sink is nil, when
// it is called a second time, after Close, or when the SDK client cannot be
// created (bad configuration).
func (s *NacosSource) Run(ctx context.Context, sink func(Document)) error {
	if sink == nil {
		return errors.New("configcenter: nacos: nil sink")
	}
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("configcenter: nacos: Run called twice")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrNacosSourceClosed
	}

	ctx, cancel := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	defer func() {
		cancel()
		// nacos-sdk-go v2.3.5 races (issue #908) when the client is shut
		// down under a request still in flight, so wait for the reader's
		// SDK call to finish. A call stuck longer than the SDK timeout
		// (an unresponsive server during start-up) is left alone: the
		// client is abandoned instead of shut down.
		select {
		case <-readerDone:
			_ = s.Close()
		case <-time.After(time.Duration(s.timeoutMs)*time.Millisecond + time.Second):
			s.log.Warn("nacos: an SDK call is still in flight at shutdown; abandoning the SDK client instead of closing it")
			s.abandon()
		}
	}()

	results := make(chan nacosRead)
	fatal := make(chan error, 1)
	// want carries read requests; its buffer of one coalesces bursts of
	// listener callbacks and ticks into a single pending read.
	want := make(chan string, 1)
	request := func(trigger string) {
		select {
		case want <- trigger:
		default:
		}
	}
	go s.reader(ctx, want, results, fatal, request, readerDone)

	var (
		gate    versionGate
		failing bool
		warned  bool
	)
	deliver := func(content, how string) {
		doc := Document{Source: "nacos", Name: s.name, Deleted: content == "", MD5: ContentMD5([]byte(content))}
		if !doc.Deleted {
			doc.Content = []byte(content)
		}
		if !gate.fresh(doc) {
			s.log.Debug("nacos: unchanged document dropped", "md5", doc.MD5, "via", how)
			return
		}
		if doc.Deleted {
			s.log.Warn("nacos: dataId is empty or deleted; delivering a deleted document", "via", how)
		} else {
			s.log.Info("nacos: document delivered", "md5", doc.MD5, "bytes", len(content), "via", how)
		}
		sink(doc)
	}

	startTimer := time.NewTimer(nacosStartBudget)
	defer startTimer.Stop()
	var tick <-chan time.Time
	if s.reRead > 0 {
		t := time.NewTicker(s.reRead)
		defer t.Stop()
		tick = t.C
	}

	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-fatal:
			return err
		case <-tick:
			request("re-read")
		case <-startTimer.C:
			if gate.seen {
				continue
			}
			content, err := s.readSnapshot()
			if err != nil {
				if !warned {
					warned = true
					s.log.Warn("nacos: server not answering and no local snapshot; nothing delivered yet, retrying in background",
						"servers", strings.Join(s.opts.Addrs, ","), "cache_dir", s.opts.CacheDir, "err", firstLine(err))
				}
				continue
			}
			if !warned {
				warned = true
				s.log.Warn("nacos: server not answering; delivering local snapshot, retrying in background",
					"servers", strings.Join(s.opts.Addrs, ","), "cache_dir", s.opts.CacheDir)
			}
			deliver(content, "snapshot")
		case r := <-results:
			if r.err != nil {
				if !failing && !warned {
					s.log.Warn("nacos: read failed (server down and no snapshot?); keeping the last document, retrying",
						"trigger", r.trigger, "err", firstLine(r.err))
				} else {
					s.log.Debug("nacos: read failed", "trigger", r.trigger, "err", firstLine(r.err))
				}
				failing, warned = true, true
				continue
			}
			if failing {
				s.log.Info("nacos: read succeeded again", "trigger", r.trigger)
				failing, warned = false, false
			}
			deliver(r.content, r.trigger)
		}
	}
}

// reader owns all SDK calls made for Run: it creates the client, registers
// the listener, performs the initial read, and then serves read requests
// one at a time, so results reach Run in the order the reads were made.
func (s *NacosSource) reader(ctx context.Context, want <-chan string, results chan<- nacosRead,
	fatal chan<- error, request func(string), done chan<- struct{}) {
	defer close(done)
	c, err := s.sdkClient()
	if err != nil {
		fatal <- err
		return
	}
	send := func(r nacosRead) bool {
		select {
		case results <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// called records a listener callback even when its read request was
	// coalesced with another trigger; each one opens a settle window.
	var called atomic.Bool
	read := func(trigger string) nacosRead {
		content, err := c.GetConfig(vo.ConfigParam{DataId: s.opts.DataID, Group: s.opts.Group})
		return nacosRead{content: content, err: err, trigger: trigger}
	}

	// Register the listener before the first read. The SDK registers
	// listeners with the server from its listen loop, which it kicks when
	// its gRPC connection comes up (the first read opens it); registering
	// first means the server learns about the listener at once instead of
	// on the loop's next 5 s tick. The SDK seeds the listener's MD5 from
	// the snapshot, so a stale snapshot only causes one extra callback,
	// i.e. one extra read that the MD5 dedup drops. Callbacks run on a
	// fresh SDK goroutine per change; they only request a read.
	if !s.noListener {
		err = c.ListenConfig(vo.ConfigParam{
			DataId: s.opts.DataID,
			Group:  s.opts.Group,
			OnChange: func(_, _, _, _ string) {
				if s.loseCallback != nil && s.loseCallback() {
					return
				}
				called.Store(true)
				request("listener")
			},
		})
		if err != nil {
			fatal <- fmt.Errorf("configcenter: nacos: listen %s: %w", s.name, err)
			return
		}
		s.mu.Lock()
		closed := s.closed
		s.listening = !closed
		s.mu.Unlock()
		if closed { // Run gave up on this call and abandoned the client
			_ = c.CancelListenConfig(vo.ConfigParam{DataId: s.opts.DataID, Group: s.opts.Group})
			return
		}
	}
	if !send(read("initial")) {
		return
	}

	// Settle reads cover pushes the SDK's listener loses; without a
	// listener there is nothing to cover.
	settleFor := s.settleFor
	if s.noListener {
		settleFor = 0
	}
	last := time.Now()
	settleUntil := last.Add(settleFor)
	settle := time.NewTimer(s.settleEvery)
	defer settle.Stop()
	for {
		var settleC <-chan time.Time
		if last.Before(settleUntil) {
			settle.Reset(time.Until(last.Add(s.settleEvery)))
			settleC = settle.C
		}
		var trigger string
		select {
		case <-ctx.Done():
			return
		case trigger = <-want:
		case <-settleC:
			trigger = "settle"
		}
		if called.Swap(false) {
			settleUntil = time.Now().Add(settleFor)
		}
		if gap := time.Until(last.Add(nacosMinReadGap)); gap > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap):
			}
		}
		r := read(trigger)
		last = time.Now()
		if !send(r) {
			return
		}
	}
}

// readSnapshot reads the SDK's local snapshot of the dataId directly from
// CacheDir (the SDK keeps config snapshots under CacheDir/config). It fails
// when no snapshot exists.
func (s *NacosSource) readSnapshot() (string, error) {
	key := util.GetConfigCacheKey(s.opts.DataID, s.opts.Group, s.opts.Namespace)
	return cache.ReadConfigFromFile(key, filepath.Join(s.opts.CacheDir, "config"))
}
