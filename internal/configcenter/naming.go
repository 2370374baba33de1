package configcenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// DefaultMembershipPoll is how often a Membership reads the healthy
// instance count and checks its server link when NamingOptions.Poll is
// zero.
const DefaultMembershipPoll = time.Second

// ShareSetter receives the local share, 1/N of the live instance count.
// (*ratelimit.Limiter).SetLocalShare implements it.
type ShareSetter interface {
	SetLocalShare(share float64) error
}

// NamingOptions configures a Membership. Addrs, CacheDir, LogDir, IP, Port
// and Share are required.
type NamingOptions struct {
	// Addrs, Namespace, Username, Password, Logger and LogLevel mean what
	// they mean in NacosOptions.
	Addrs              []string
	Namespace          string
	Username, Password string
	Logger             *slog.Logger
	LogLevel           slog.Level
	// Group and Service name the Nacos naming service the instances
	// register in. Instances that read the same limits document share its
	// limits, so cmd/payserver uses the document's group and dataId.
	Group, Service string
	// CacheDir and LogDir are the SDK's directories; they must not be
	// those of a NacosSource (the naming client writes its own cache).
	CacheDir, LogDir string
	// IP and Port are this instance's address as registered.
	IP   string
	Port uint64
	// Floor is the least instance count N used (PAYSERVER_INSTANCE_COUNT);
	// values below 1 mean 1.
	Floor int
	// Share receives 1/N whenever N changes, and once at start (1/Floor).
	Share ShareSetter
	// Contacted, when set, is told each time the poll finds the SDK
	// connected to a Nacos server.
	Contacted func(time.Time)
	// Live, when set, is told each healthy instance count seen.
	Live func(int)
	// Poll is the period of the instance count read, the link check and
	// registration retries; 0 means DefaultMembershipPoll.
	Poll time.Duration
	// CloseAfter, when set, is closed once every other SDK client of the
	// process (the limits source's config client) is shut down; Run waits
	// for it (up to closeAfterLimit) before shutting its own client down.
	// nacos-sdk-go v2.3.5's RpcClient.Shutdown deletes from a process-wide
	// client map without the lock under which every other client reads
	// that map on each request, so a shutdown while the config client is
	// still working is a data race inside the SDK. Past the limit the
	// naming client is abandoned instead (the process is exiting).
	CloseAfter <-chan struct{}
}

// closeAfterLimit bounds Run's wait for NamingOptions.CloseAfter.
const closeAfterLimit = 10 * time.Second

// sdkMu serialises the SDK client creations and shutdowns this package
// makes. nacos-sdk-go v2.3.5 keeps process-wide state that both touch
// without a lock: a shutdown deletes from its client map (see
// NamingOptions.CloseAfter), and a creation fills a cached local IP.
var sdkMu sync.Mutex

// warmLocalIP fills the SDK's package-level local-IP cache (util.LocalIP)
// once, before any client exists: the SDK fills it lazily, from the
// goroutines of every client, without a lock (a data race the race
// detector reports between the config and the naming client).
var warmLocalIP = sync.OnceFunc(func() { util.LocalIP() })

// newSDKClient creates an SDK client (config or naming) on a copy of
// servers, after warming the SDK's local-IP cache, under sdkMu.
func newSDKClient[C any](cc constant.ClientConfig, servers []constant.ServerConfig, create func(vo.NacosClientParam) (C, error)) (C, error) {
	own := make([]constant.ServerConfig, len(servers))
	copy(own, servers)
	warmLocalIP()
	sdkMu.Lock()
	defer sdkMu.Unlock()
	return create(vo.NacosClientParam{ClientConfig: &cc, ServerConfigs: own})
}

// shutdownSDK shuts an SDK client down under sdkMu.
func shutdownSDK(closeClient func()) {
	sdkMu.Lock()
	defer sdkMu.Unlock()
	closeClient()
}

// Membership registers this instance in Nacos naming as an ephemeral
// instance and keeps its local share at 1/N, where N is the number of
// healthy instances registered in the service, never less than Floor.
//
// Ephemeral instances live as long as their client's gRPC connection (Nacos
// 2.x; r-nacos behaves the same): an instance that exits or is killed
// drops out of the list as soon as the server notices the connection is
// gone, and the others' shares grow. While Nacos is unreachable, N stays
// at the last count seen.
type Membership struct {
	opts    NamingOptions
	servers []constant.ServerConfig
	log     *slog.Logger

	mu    sync.Mutex
	n     int // current N (≥ Floor)
	share float64
}

// NewMembership validates opts. It performs no network I/O; Run does.
func NewMembership(opts NamingOptions) (*Membership, error) {
	servers, err := nacosServerConfigs(opts.Addrs)
	if err != nil {
		return nil, err
	}
	if opts.Share == nil {
		return nil, errors.New("configcenter: naming: nil ShareSetter")
	}
	if opts.Group == "" {
		opts.Group = DefaultNacosGroup
	}
	if opts.Service == "" {
		return nil, errors.New("configcenter: naming: service name is required")
	}
	if !validNacosName(opts.Group) || !validNacosName(opts.Service) {
		return nil, fmt.Errorf("configcenter: naming: invalid group %q or service %q (allowed: letters, digits, . _ : -)", opts.Group, opts.Service)
	}
	if net.ParseIP(opts.IP) == nil {
		return nil, fmt.Errorf("configcenter: naming: instance IP %q is not an IP address", opts.IP)
	}
	if opts.Port == 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("configcenter: naming: instance port %d outside 1..65535", opts.Port)
	}
	if opts.Password != "" && opts.Username == "" {
		return nil, errors.New("configcenter: naming: password set without username")
	}
	if opts.CacheDir, err = checkNacosDir("CacheDir", opts.CacheDir); err != nil {
		return nil, err
	}
	if opts.LogDir, err = checkNacosDir("LogDir", opts.LogDir); err != nil {
		return nil, err
	}
	if opts.Floor < 1 {
		opts.Floor = 1
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultMembershipPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Membership{
		opts:    opts,
		servers: servers,
		log:     opts.Logger.With(slog.String("component", "nacos-naming"), slog.String("service", opts.Group+"/"+opts.Service)),
		n:       opts.Floor,
		share:   1 / float64(opts.Floor),
	}, nil
}

// Count returns N, the instance count the local share is 1/N of.
func (m *Membership) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// countFor is the N used for a healthy count: the count, at least Floor.
func (m *Membership) countFor(live int) int {
	return max(live, m.opts.Floor)
}

// observe applies a healthy instance count (0 = unknown, keep N).
func (m *Membership) observe(live int) {
	if live <= 0 {
		return
	}
	if m.opts.Live != nil {
		m.opts.Live(live)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.countFor(live)
	if n == m.n {
		return
	}
	share := 1 / float64(n)
	if err := m.opts.Share.SetLocalShare(share); err != nil {
		m.log.Error("naming: local share not applied", "share", share, "err", err)
		return
	}
	m.log.Info("naming: live instance count changed; local share follows", "live", live, "floor", m.opts.Floor, "from", m.n, "to", n, "share", share)
	m.n, m.share = n, share
}

// Run creates the SDK naming client, registers this instance, reads the
// service's healthy instances every Poll and keeps the share current until
// ctx is done; it then
// deregisters the instance and closes the client. Run returns an error
// only when the client cannot be created; a server that is unreachable at
// start is retried (the SDK reconnects and re-registers by itself).
func (m *Membership) Run(ctx context.Context) error {
	if err := m.opts.Share.SetLocalShare(m.share); err != nil {
		return fmt.Errorf("configcenter: naming: %w", err)
	}
	for _, d := range []string{m.opts.CacheDir, m.opts.LogDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("configcenter: naming: %w", err)
		}
	}
	installNacosSDKLogger(m.opts.Logger, m.opts.LogLevel, m.opts.Password)
	timeout := uint64(DefaultNacosTimeoutMs)
	cc := constant.ClientConfig{
		TimeoutMs:   timeout,
		NamespaceId: m.opts.Namespace,
		CacheDir:    m.opts.CacheDir,
		LogDir:      m.opts.LogDir,
		LogLevel:    nacosSDKLogLevel(m.opts.LogLevel),
		// An instance list cached by an earlier run would count instances
		// that are gone.
		NotLoadCacheAtStart:  true,
		UpdateCacheWhenEmpty: true,
		Username:             m.opts.Username,
		Password:             m.opts.Password,
	}
	client, err := newSDKClient(cc, m.servers, clients.NewNamingClient)
	if err != nil {
		return fmt.Errorf("configcenter: naming: create client: %w", err)
	}
	defer m.close(client)

	lister := newInstanceLister(m.opts)
	registered := false
	tick := time.NewTicker(m.opts.Poll)
	defer tick.Stop()
	for {
		if !registered {
			registered = m.register(client)
		}
		if n, err := lister.healthy(ctx); err != nil {
			m.log.Debug("naming: instance list not available; keeping the count", "err", firstLine(err))
		} else {
			m.observe(n)
		}
		if client.ServerHealthy() && m.opts.Contacted != nil {
			m.opts.Contacted(time.Now())
		}
		select {
		case <-ctx.Done():
			if registered {
				m.deregister(client)
			}
			return nil
		case <-tick.C:
		}
	}
}

// close shuts the SDK client down once CloseAfter allows it.
func (m *Membership) close(client naming_client.INamingClient) {
	if m.opts.CloseAfter != nil {
		select {
		case <-m.opts.CloseAfter:
		case <-time.After(closeAfterLimit):
			m.log.Warn("naming: the other Nacos clients are still open; abandoning the naming client instead of shutting it down")
			return
		}
	}
	shutdownSDK(client.CloseClient)
}

// register registers the instance; it reports whether the server accepted.
func (m *Membership) register(client naming_client.INamingClient) bool {
	host, _ := os.Hostname()
	ok, err := client.RegisterInstance(vo.RegisterInstanceParam{
		Ip: m.opts.IP, Port: m.opts.Port, Weight: 1, Enable: true, Healthy: true, Ephemeral: true,
		ServiceName: m.opts.Service, GroupName: m.opts.Group,
		Metadata: map[string]string{"host": host, "pid": strconv.Itoa(os.Getpid())},
	})
	if err != nil || !ok {
		m.log.Warn("naming: register failed; retrying", "err", firstLine(err))
		return false
	}
	m.log.Info("naming: instance registered", "ip", m.opts.IP, "port", m.opts.Port)
	return true
}

func (m *Membership) deregister(client naming_client.INamingClient) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := client.DeregisterInstance(vo.DeregisterInstanceParam{
			Ip: m.opts.IP, Port: m.opts.Port, ServiceName: m.opts.Service, GroupName: m.opts.Group, Ephemeral: true,
		})
		if err != nil {
			m.log.Warn("naming: deregister failed; the server drops the instance when the connection closes", "err", firstLine(err))
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Duration(DefaultNacosTimeoutMs) * time.Millisecond):
	}
}

// InstanceIP picks the IP to register for a listener address: its host
// when that is a specific IP, else the first non-loopback IPv4 address of
// the machine, else 127.0.0.1.
func InstanceIP(listenHost string) string {
	if ip := net.ParseIP(listenHost); ip != nil && !ip.IsUnspecified() {
		return ip.String()
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
