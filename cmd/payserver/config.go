package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"payserver/internal/netaddr"
	"payserver/internal/ratelimit"
)

// Config is every setting of payserver, decoded once into typed values by
// LoadConfig (config_load.go): the YAML file (PAYSERVER_CONFIG, default
// configs/payserver.yaml when present), then the PAYSERVER_* environment
// variables (config_env.go), which win. The yaml tags are the YAML keys.
type Config struct {
	HTTPAddr   string `yaml:"httpAddr"`   // PAYSERVER_HTTP_ADDR
	DataDir    string `yaml:"dataDir"`    // PAYSERVER_DATA_DIR
	LimitsFile string `yaml:"limitsFile"` // PAYSERVER_LIMITS_FILE
	// MySQLDSN selects MySQL/MariaDB; empty means embedded SQLite in DataDir.
	MySQLDSN string `yaml:"mysqlDsn"` // PAYSERVER_MYSQL_DSN
	// MySQLTLS, when on, connects to MySQL over TLS verified against its CA
	// (a driver TLS config registered by openDB).
	MySQLTLS    TLSFiles `yaml:"mysqlTls"`    // PAYSERVER_MYSQL_TLS_*
	AutoMigrate bool     `yaml:"autoMigrate"` // PAYSERVER_AUTO_MIGRATE
	// DBGroupCommit sends concurrent order claims as one multi-row INSERT
	// and concurrent outcomes as one UPDATE (repo.OrdersOptions).
	DBGroupCommit bool `yaml:"dbGroupCommit"` // settings file only
	// DBBatchReads sends concurrent idempotency lookups as one SELECT.
	DBBatchReads bool `yaml:"dbBatchReads"` // settings file only
	// DBMaxBatch bounds one batched statement; 0 means 64, the most.
	DBMaxBatch int `yaml:"dbMaxBatch"` // settings file only

	// RedisMode says how RedisAddrs are read; empty infers it (see
	// RedisMode). Sentinel mode reads RedisSentinels and RedisMaster instead.
	RedisMode RedisMode `yaml:"redisMode"` // PAYSERVER_REDIS_MODE
	// RedisAddrs are the standalone server or the Cluster seed nodes. Empty
	// (and no mode) means the embedded Redis-protocol server.
	RedisAddrs []string `yaml:"redisAddrs"` // PAYSERVER_REDIS_ADDR, a comma list
	// RedisUsername is the ACL user; empty means the default user.
	RedisUsername string `yaml:"redisUsername"` // PAYSERVER_REDIS_USERNAME
	RedisPassword string `yaml:"redisPassword"` // PAYSERVER_REDIS_PASSWORD
	// RedisSentinels are the sentinels' host:port (sentinel mode).
	RedisSentinels []string `yaml:"redisSentinels"` // PAYSERVER_REDIS_SENTINELS
	// RedisMaster is the master name the sentinels monitor (sentinel mode).
	RedisMaster string `yaml:"redisMaster"` // PAYSERVER_REDIS_MASTER
	// RedisSentinelUsername and RedisSentinelPassword authenticate to the
	// sentinels themselves (their requirepass / ACL), when they need it.
	RedisSentinelUsername string `yaml:"redisSentinelUsername"` // PAYSERVER_REDIS_SENTINEL_USERNAME
	RedisSentinelPassword string `yaml:"redisSentinelPassword"` // PAYSERVER_REDIS_SENTINEL_PASSWORD
	// RedisTLS, when on, speaks TLS to every Redis server (and sentinel).
	RedisTLS TLSFiles `yaml:"redisTls"` // PAYSERVER_REDIS_TLS_*

	// PprofAddr, when set, serves net/http/pprof on this loopback address
	// (a listener of its own, never the API's). Empty means off.
	PprofAddr  string `yaml:"pprofAddr"`  // PAYSERVER_PPROF_ADDR
	AdminToken string `yaml:"adminToken"` // PAYSERVER_ADMIN_TOKEN
	// AuthMaxFailures is how many failed authentications one address may
	// make within a minute before it is refused until the minute is over
	// (authguard). 0 means authguard.MaxFailures (10).
	AuthMaxFailures int        `yaml:"authMaxFailures"` // PAYSERVER_AUTH_MAX_FAILURES
	LogLevel        slog.Level `yaml:"logLevel"`        // PAYSERVER_LOG_LEVEL: debug, info, warn, error
	LogFormat       LogFormat  `yaml:"logFormat"`       // PAYSERVER_LOG_FORMAT: text, json

	Limiter LimiterConfig `yaml:"limiter"`
	Nacos   NacosConfig   `yaml:"nacos"`
	Stats   StatsConfig   `yaml:"stats"`
	Routing RoutingConfig `yaml:"routing"`
	// DecisionLog is the decision log and its what-if replays
	// (config_whatif.go).
	DecisionLog DecisionLogConfig `yaml:"decisionLog"`

	ChannelTimeout  time.Duration `yaml:"channelTimeout"`  // PAYSERVER_CHANNEL_TIMEOUT
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"` // PAYSERVER_SHUTDOWN_TIMEOUT
	// OrderStaleAfter is the age past which a PROCESSING order (its outcome
	// never recorded: a crash mid-call) is marked UNKNOWN. 0 means
	// channelTimeout + 1m.
	OrderStaleAfter time.Duration `yaml:"orderStaleAfter"` // PAYSERVER_ORDER_STALE_AFTER
	// LostAnswerGrace is how long a payment whose limiter answer was lost
	// (503) waits for its client's retry before it is closed NOT_SENT and
	// its slot released. 0 means 30s.
	LostAnswerGrace time.Duration `yaml:"lostAnswerGrace"` // PAYSERVER_LOST_ANSWER_GRACE
	// Channels are the configured channels: in-process simulators unless
	// a gateway URL is set (config_channels.go).
	Channels map[string]ChannelConfig `yaml:"channels"`
	// ChannelGatewayURL and ChannelGatewaySecret send every configured
	// channel to one channel gateway, at URL/CODE; a channel's own
	// gateway settings win.
	ChannelGatewayURL    string `yaml:"channelGatewayUrl"`    // PAYSERVER_CHANNEL_GATEWAY_URL
	ChannelGatewaySecret string `yaml:"channelGatewaySecret"` // PAYSERVER_CHANNEL_GATEWAY_SECRET
	// Resolver tunes the resolution of unknown outcomes with the channels.
	Resolver ResolverConfig `yaml:"resolver"`

	// UnknownEnv lists the PAYSERVER_* variables set in the environment
	// that payserver does not know (typos, or settings of another version);
	// Run warns about each. Not a setting.
	UnknownEnv []string `yaml:"-"`
	// Clients are the limits service's clients with their scopes
	// (limits_api.go); never logged.
	Clients map[string]ClientConfig `yaml:"clients"`
	// API is the limits service for other callers, from the environment
	// and Clients (limits_api.go).
	API APIConfig `yaml:"-"`
}

// LimiterConfig tunes the channel limiter.
type LimiterConfig struct {
	Policy        ratelimit.Policy `yaml:"policy"`        // PAYSERVER_LIMITER_POLICY: local, allow, deny
	Timeout       time.Duration    `yaml:"timeout"`       // PAYSERVER_LIMITER_TIMEOUT
	InstanceCount int              `yaml:"instanceCount"` // PAYSERVER_INSTANCE_COUNT
	LocalShare    float64          `yaml:"localShare"`    // settings file only (overrides 1/instanceCount)
	NearCache     bool             `yaml:"nearCache"`     // settings file only
	// Coalesce sends the concurrent checks of one key to Redis as one
	// script call (redisstore.Options.Coalesce).
	Coalesce bool `yaml:"coalesce"` // settings file only
	// MaxBatch bounds the checks in one coalesced call; 0 means 128.
	MaxBatch int `yaml:"maxBatch"` // settings file only
}

// ResolverConfig tunes the resolver of unknown outcomes (pay.Resolver):
// an UNKNOWN order is queried Backoff after its first unanswered attempt,
// then twice as long each time up to MaxBackoff.
type ResolverConfig struct {
	Backoff    time.Duration `yaml:"backoff"`    // settings file only, default 1s
	MaxBackoff time.Duration `yaml:"maxBackoff"` // settings file only, default 1m
}

// RoutingConfig tunes the channel health breakers of routed payments
// (channel.HealthOptions): a channel whose last BreakerFailures calls
// failed (transport errors, timeouts, channel system errors; not declines)
// is skipped as unhealthy for BreakerCooldown, then BreakerProbes calls
// probe it.
type RoutingConfig struct {
	BreakerFailures uint32        `yaml:"breakerFailures"` // settings file only, default 5
	BreakerCooldown time.Duration `yaml:"breakerCooldown"` // settings file only, default 30s
	BreakerProbes   uint32        `yaml:"breakerProbes"`   // settings file only, default 1
}

// NacosConfig selects Nacos as the limits source when Addrs is set.
type NacosConfig struct {
	Addrs     []string `yaml:"addrs"`     // PAYSERVER_NACOS_ADDR (comma list)
	Namespace string   `yaml:"namespace"` // PAYSERVER_NACOS_NAMESPACE
	Group     string   `yaml:"group"`     // PAYSERVER_NACOS_GROUP
	DataID    string   `yaml:"dataId"`    // PAYSERVER_NACOS_DATA_ID
	Username  string   `yaml:"username"`  // PAYSERVER_NACOS_USERNAME
	Password  string   `yaml:"password"`  // PAYSERVER_NACOS_PASSWORD
}

// DefaultConfig is the embedded default: no external server needed.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:        "127.0.0.1:8080",
		DataDir:         defaultDataDir(),
		LimitsFile:      "configs/channel-limits.yaml",
		LogLevel:        slog.LevelInfo,
		LogFormat:       LogText,
		DBGroupCommit:   true,
		DBBatchReads:    true,
		Limiter:         LimiterConfig{Policy: ratelimit.PolicyLocal, Timeout: 50 * time.Millisecond, InstanceCount: 1, NearCache: true, Coalesce: true},
		Nacos:           NacosConfig{Group: "PAY_GROUP", DataID: "payserver-channel-limits"},
		Stats:           StatsConfig{FlushInterval: 5 * time.Second},
		Routing:         RoutingConfig{BreakerFailures: 5, BreakerCooldown: 30 * time.Second, BreakerProbes: 1},
		DecisionLog:     defaultDecisionLog,
		ChannelTimeout:  5 * time.Second,
		ShutdownTimeout: 15 * time.Second,
		Resolver:        ResolverConfig{Backoff: 5 * time.Second, MaxBackoff: time.Minute},
		Channels: map[string]ChannelConfig{
			"ALIPAY": {}, "WECHAT": {}, "UNIONPAY": {},
		},
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "payserver")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "payserver")
	}
	return filepath.Join(os.TempDir(), "payserver")
}

// Validate checks what the types cannot: settings that depend on each
// other, and ranges.
// staleMargin is how much longer than any channel call a PROCESSING order
// must be before the sweeper may take it for stale.
const staleMargin = time.Second

// longestCallTimeout is the longest a channel call may take: the channel
// timeout, or a gateway channel's own call timeout.
func (c Config) longestCallTimeout() time.Duration {
	longest := c.ChannelTimeout
	for _, sc := range c.Channels {
		longest = max(longest, sc.Gateway.CallTimeout)
	}
	return longest
}

func (c Config) Validate() error {
	var errs []error
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("httpAddr is empty"))
	}
	if c.AuthMaxFailures < 0 || c.AuthMaxFailures > 1_000_000 {
		errs = append(errs, errors.New("PAYSERVER_AUTH_MAX_FAILURES must be in [0, 1000000] (0 = 10)"))
	}
	if c.AdminToken != "" && (len(c.AdminToken) < minClientTokenLen || strings.ContainsAny(c.AdminToken, " \t\r\n")) {
		errs = append(errs, fmt.Errorf("PAYSERVER_ADMIN_TOKEN must be at least %d characters, without whitespace", minClientTokenLen))
	}
	if c.HTTPAddr != "" && c.AdminToken == "" && !netaddr.IsLoopbackName(c.HTTPAddr) {
		// Without a token, admin access rests on the request being local.
		errs = append(errs, fmt.Errorf("PAYSERVER_ADMIN_TOKEN is required when httpAddr (PAYSERVER_HTTP_ADDR) %s is not a loopback address: admin routes without a token answer local requests only", c.HTTPAddr))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("dataDir is empty"))
	}
	if err := c.DecisionLog.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Nacos.Addrs) == 0 && c.LimitsFile == "" {
		errs = append(errs, errors.New("neither a limits file nor a Nacos address is set"))
	}
	if c.Limiter.InstanceCount < 1 {
		errs = append(errs, errors.New("PAYSERVER_INSTANCE_COUNT must be at least 1"))
	}
	if c.DBMaxBatch < 0 || c.DBMaxBatch > 64 {
		errs = append(errs, errors.New("dbMaxBatch must be in [0, 64] (0 = 64)"))
	}
	if c.Limiter.MaxBatch < 0 || c.Limiter.MaxBatch > 1000 {
		errs = append(errs, errors.New("limiter.maxBatch must be in [0, 1000] (0 = 128)"))
	}
	if c.Limiter.LocalShare < 0 || c.Limiter.LocalShare > 1 {
		errs = append(errs, errors.New("limiter.localShare must be in (0, 1]"))
	}
	if c.Limiter.Timeout <= 0 || c.ChannelTimeout <= 0 || c.ShutdownTimeout <= 0 || c.Stats.FlushInterval <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	if c.Routing.BreakerFailures < 1 || c.Routing.BreakerProbes < 1 || c.Routing.BreakerCooldown <= 0 {
		errs = append(errs, errors.New("routing.breakerFailures and routing.breakerProbes must be at least 1, routing.breakerCooldown positive"))
	}
	if len(c.Channels) == 0 {
		errs = append(errs, errors.New("no channels configured"))
	}
	for code, sc := range c.Channels {
		if reason := ratelimit.CodeProblem(code); reason != "" {
			errs = append(errs, fmt.Errorf("channel code %q %s", code, reason))
		}
		if err := sc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("channel %s: %w", code, err))
		}
	}
	errs = append(errs, c.validateGateways())
	if longest := c.longestCallTimeout(); c.OrderStaleAfter > 0 && c.OrderStaleAfter < longest+staleMargin {
		// A PROCESSING order younger than its call timeout may be in
		// flight: marked UNKNOWN, it would be queried, closed and its slot
		// freed while the call can still reach the channel.
		errs = append(errs, fmt.Errorf("PAYSERVER_ORDER_STALE_AFTER %v must be at least the longest channel call timeout (%v) plus %v", c.OrderStaleAfter, longest, staleMargin))
	}
	if c.Resolver.Backoff <= 0 || c.Resolver.MaxBackoff < c.Resolver.Backoff {
		errs = append(errs, errors.New("resolver.backoff must be positive and resolver.maxBackoff at least as long"))
	}
	if c.PprofAddr != "" && !netaddr.IsLoopback(c.PprofAddr) {
		errs = append(errs, fmt.Errorf("PAYSERVER_PPROF_ADDR %q: must be a loopback host:port", c.PprofAddr))
	}
	errs = append(errs, c.validateRedis())
	errs = append(errs, c.RedisTLS.validate("PAYSERVER_REDIS_TLS"))
	errs = append(errs, c.MySQLTLS.validate("PAYSERVER_MYSQL_TLS"))
	if c.MySQLTLS.On() && c.MySQLDSN == "" {
		errs = append(errs, errors.New("PAYSERVER_MYSQL_TLS_* is set but PAYSERVER_MYSQL_DSN is not (SQLite has no TLS)"))
	}
	return errors.Join(errs...)
}

// validateRedis checks that the addresses fit the mode.
func (c Config) validateRedis() error {
	switch c.RedisMode {
	case RedisSentinel:
		var errs []error
		if len(c.RedisSentinels) == 0 {
			errs = append(errs, errors.New("PAYSERVER_REDIS_MODE=sentinel needs PAYSERVER_REDIS_SENTINELS (comma list of sentinel host:port)"))
		}
		if c.RedisMaster == "" {
			errs = append(errs, errors.New("PAYSERVER_REDIS_MODE=sentinel needs PAYSERVER_REDIS_MASTER (the master name the sentinels monitor)"))
		}
		if len(c.RedisAddrs) > 0 {
			errs = append(errs, errors.New("PAYSERVER_REDIS_MODE=sentinel takes the master from the sentinels: unset PAYSERVER_REDIS_ADDR(S)"))
		}
		return errors.Join(errs...)
	case RedisStandalone:
		if len(c.RedisAddrs) != 1 {
			return fmt.Errorf("PAYSERVER_REDIS_MODE=standalone needs exactly one address in PAYSERVER_REDIS_ADDR, got %d", len(c.RedisAddrs))
		}
	case RedisCluster:
		if len(c.RedisAddrs) == 0 {
			return errors.New("PAYSERVER_REDIS_MODE=cluster needs seed addresses in PAYSERVER_REDIS_ADDR")
		}
	}
	if len(c.RedisSentinels) > 0 || c.RedisMaster != "" {
		return errors.New("PAYSERVER_REDIS_SENTINELS / PAYSERVER_REDIS_MASTER are set but PAYSERVER_REDIS_MODE is not sentinel")
	}
	return nil
}

// EffectiveRedisMode is the mode payserver runs Redis in: the configured
// one, or, when unset, inferred as before the mode existed (no address:
// embedded; one: standalone; several: cluster). Inferred is true in the
// last two cases; openRedis then checks the server agrees, so that one seed
// address of a Cluster is never used as a standalone server.
func (c Config) EffectiveRedisMode() (mode RedisMode, inferred bool) {
	switch {
	case c.RedisMode != "":
		return c.RedisMode, false
	case len(c.RedisAddrs) == 0:
		return RedisEmbedded, false
	case len(c.RedisAddrs) == 1:
		return RedisStandalone, true
	default:
		return RedisCluster, true
	}
}

// LocalShare is the fraction of each limit this instance enforces when Redis
// fails.
func (c Config) LocalShare() float64 {
	if c.Limiter.LocalShare > 0 {
		return c.Limiter.LocalShare
	}
	return 1 / float64(c.Limiter.InstanceCount)
}

// LogValue keeps secrets out of logs.
func (c Config) LogValue() slog.Value {
	mode, _ := c.EffectiveRedisMode()
	redis := string(mode)
	switch {
	case mode == RedisSentinel:
		redis += " " + c.RedisMaster + "@" + strings.Join(c.RedisSentinels, ",")
	case len(c.RedisAddrs) > 0:
		redis += " " + strings.Join(c.RedisAddrs, ",")
	}
	if c.RedisTLS.On() {
		redis += " tls"
	}
	if c.RedisUsername != "" {
		redis += " user " + c.RedisUsername
	}
	db := "sqlite " + filepath.Join(c.DataDir, "payserver.db")
	if c.MySQLDSN != "" {
		db = "mysql " + redactDSN(c.MySQLDSN)
		if c.MySQLTLS.On() {
			db += " tls"
		}
	}
	limits := "file " + c.LimitsFile
	if len(c.Nacos.Addrs) > 0 {
		limits = "nacos " + strings.Join(c.Nacos.Addrs, ",") + " " + c.Nacos.Group + "/" + c.Nacos.DataID
	}
	return slog.GroupValue(
		slog.String("httpAddr", c.HTTPAddr), slog.String("dataDir", c.DataDir),
		slog.String("db", db), slog.String("redis", redis), slog.String("limits", limits),
		slog.String("policy", string(c.Limiter.Policy)), slog.Bool("adminToken", c.AdminToken != ""),
		slog.String("channelGateway", c.ChannelGatewayURL),
	)
}

// redactDSN hides the password of a go-sql-driver DSN user:pass@tcp(...)/db.
func redactDSN(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	cred := dsn[:at]
	if user, _, ok := strings.Cut(cred, ":"); ok {
		return user + ":***" + dsn[at:]
	}
	return dsn
}
