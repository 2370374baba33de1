package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"payserver/internal/channel"
	"payserver/internal/ratelimit"
)

// Config is every setting of payserver. It is read from a YAML file
// (PAYSERVER_CONFIG, default configs/payserver.yaml when present), then the
// PAYSERVER_* environment variables, which win.
type Config struct {
	HTTPAddr   string `yaml:"httpAddr"`   // PAYSERVER_HTTP_ADDR
	DataDir    string `yaml:"dataDir"`    // PAYSERVER_DATA_DIR
	LimitsFile string `yaml:"limitsFile"` // PAYSERVER_LIMITS_FILE
	// MySQLDSN selects MySQL/MariaDB; empty means embedded SQLite in DataDir.
	MySQLDSN    string `yaml:"mysqlDsn"`    // PAYSERVER_MYSQL_DSN
	AutoMigrate bool   `yaml:"autoMigrate"` // PAYSERVER_AUTO_MIGRATE
	// DBGroupCommit sends concurrent order claims as one multi-row INSERT
	// and concurrent outcomes as one UPDATE (repo.OrdersOptions).
	DBGroupCommit bool `yaml:"dbGroupCommit"` // PAYSERVER_DB_GROUP_COMMIT
	// DBBatchReads sends concurrent idempotency lookups as one SELECT.
	DBBatchReads bool `yaml:"dbBatchReads"` // PAYSERVER_DB_BATCH_READS
	// DBMaxBatch bounds one batched statement; 0 means 64, the most.
	DBMaxBatch int `yaml:"dbMaxBatch"` // PAYSERVER_DB_MAX_BATCH
	// RedisAddrs selects Redis: one address is standalone, several a
	// Cluster. Empty means the embedded Redis-protocol server.
	RedisAddrs    []string `yaml:"redisAddrs"`    // PAYSERVER_REDIS_ADDR, PAYSERVER_REDIS_ADDRS
	RedisPassword string   `yaml:"redisPassword"` // PAYSERVER_REDIS_PASSWORD
	// PprofAddr, when set, serves net/http/pprof on this loopback address
	// (a listener of its own, never the API's). Empty means off.
	PprofAddr  string `yaml:"pprofAddr"`  // PAYSERVER_PPROF_ADDR
	AdminToken string `yaml:"adminToken"` // PAYSERVER_ADMIN_TOKEN
	LogLevel   string `yaml:"logLevel"`   // PAYSERVER_LOG_LEVEL: debug, info, warn, error
	LogFormat  string `yaml:"logFormat"`  // PAYSERVER_LOG_FORMAT: text, json

	Limiter LimiterConfig `yaml:"limiter"`
	Nacos   NacosConfig   `yaml:"nacos"`
	Stats   StatsConfig   `yaml:"stats"`

	ChannelTimeout  time.Duration `yaml:"channelTimeout"`  // PAYSERVER_CHANNEL_TIMEOUT
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"` // PAYSERVER_SHUTDOWN_TIMEOUT
	// OrderStaleAfter is the age past which a PROCESSING order (its outcome
	// never recorded: a crash mid-call) is marked UNKNOWN. 0 means
	// channelTimeout + 1m.
	OrderStaleAfter time.Duration                      `yaml:"orderStaleAfter"` // PAYSERVER_ORDER_STALE_AFTER
	Channels        map[string]channel.SimulatorConfig `yaml:"channels"`
}

// LimiterConfig tunes the channel limiter.
type LimiterConfig struct {
	Policy        string        `yaml:"policy"`        // PAYSERVER_LIMITER_POLICY: local, allow, deny
	Timeout       time.Duration `yaml:"timeout"`       // PAYSERVER_LIMITER_TIMEOUT
	InstanceCount int           `yaml:"instanceCount"` // PAYSERVER_INSTANCE_COUNT
	LocalShare    float64       `yaml:"localShare"`    // PAYSERVER_LIMITER_LOCAL_SHARE (overrides 1/instanceCount)
	NearCache     bool          `yaml:"nearCache"`     // PAYSERVER_LIMITER_NEAR_CACHE
	// Coalesce sends the concurrent checks of one key to Redis as one
	// script call (ratelimit.RedisStoreOptions.Coalesce).
	Coalesce bool `yaml:"coalesce"` // PAYSERVER_LIMITER_COALESCE
	// MaxBatch bounds the checks in one coalesced call; 0 means 128.
	MaxBatch int `yaml:"maxBatch"` // PAYSERVER_LIMITER_MAX_BATCH
	// Unconfigured applies before any limits document loaded: allow
	// (every key unlimited) or deny (503 for every payment).
	Unconfigured string `yaml:"unconfigured"` // PAYSERVER_LIMITS_DEFAULT_POLICY
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
		LogLevel:        "info",
		LogFormat:       "text",
		DBGroupCommit:   true,
		DBBatchReads:    true,
		Limiter:         LimiterConfig{Policy: "local", Timeout: 50 * time.Millisecond, InstanceCount: 1, NearCache: true, Coalesce: true},
		Nacos:           NacosConfig{Group: "PAY_GROUP", DataID: "payserver-channel-limits"},
		Stats:           StatsConfig{FlushInterval: 5 * time.Second},
		ChannelTimeout:  5 * time.Second,
		ShutdownTimeout: 15 * time.Second,
		Channels: map[string]channel.SimulatorConfig{
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

// LoadConfig reads the YAML file (if any) and the environment.
func LoadConfig(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	path := getenv("PAYSERVER_CONFIG")
	explicit := path != ""
	if !explicit {
		path = "configs/payserver.yaml"
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	case explicit || !errors.Is(err, os.ErrNotExist):
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

func applyEnv(cfg *Config, getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	list := func(name string, dst *[]string) {
		if v := getenv(name); v != "" {
			*dst = splitList(v)
		}
	}
	var errs []error
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a duration", name, v))
				return
			}
			*dst = d
		}
	}
	boolean := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not true or false", name, v))
				return
			}
			*dst = b
		}
	}
	integer := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a whole number", name, v))
				return
			}
			*dst = n
		}
	}
	str("PAYSERVER_HTTP_ADDR", &cfg.HTTPAddr)
	str("PAYSERVER_DATA_DIR", &cfg.DataDir)
	str("PAYSERVER_LIMITS_FILE", &cfg.LimitsFile)
	str("PAYSERVER_MYSQL_DSN", &cfg.MySQLDSN)
	boolean("PAYSERVER_AUTO_MIGRATE", &cfg.AutoMigrate)
	boolean("PAYSERVER_DB_GROUP_COMMIT", &cfg.DBGroupCommit)
	boolean("PAYSERVER_DB_BATCH_READS", &cfg.DBBatchReads)
	integer("PAYSERVER_DB_MAX_BATCH", &cfg.DBMaxBatch)
	list("PAYSERVER_REDIS_ADDR", &cfg.RedisAddrs)
	list("PAYSERVER_REDIS_ADDRS", &cfg.RedisAddrs)
	str("PAYSERVER_REDIS_PASSWORD", &cfg.RedisPassword)
	str("PAYSERVER_PPROF_ADDR", &cfg.PprofAddr)
	str("PAYSERVER_ADMIN_TOKEN", &cfg.AdminToken)
	str("PAYSERVER_LOG_LEVEL", &cfg.LogLevel)
	str("PAYSERVER_LOG_FORMAT", &cfg.LogFormat)
	str("PAYSERVER_LIMITER_POLICY", &cfg.Limiter.Policy)
	dur("PAYSERVER_LIMITER_TIMEOUT", &cfg.Limiter.Timeout)
	integer("PAYSERVER_INSTANCE_COUNT", &cfg.Limiter.InstanceCount)
	if v := getenv("PAYSERVER_LIMITER_LOCAL_SHARE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("PAYSERVER_LIMITER_LOCAL_SHARE: %q is not a number", v))
		}
		cfg.Limiter.LocalShare = f
	}
	boolean("PAYSERVER_LIMITER_NEAR_CACHE", &cfg.Limiter.NearCache)
	boolean("PAYSERVER_LIMITER_COALESCE", &cfg.Limiter.Coalesce)
	integer("PAYSERVER_LIMITER_MAX_BATCH", &cfg.Limiter.MaxBatch)
	str("PAYSERVER_LIMITS_DEFAULT_POLICY", &cfg.Limiter.Unconfigured)
	list("PAYSERVER_NACOS_ADDR", &cfg.Nacos.Addrs)
	str("PAYSERVER_NACOS_NAMESPACE", &cfg.Nacos.Namespace)
	str("PAYSERVER_NACOS_GROUP", &cfg.Nacos.Group)
	str("PAYSERVER_NACOS_DATA_ID", &cfg.Nacos.DataID)
	str("PAYSERVER_NACOS_USERNAME", &cfg.Nacos.Username)
	str("PAYSERVER_NACOS_PASSWORD", &cfg.Nacos.Password)
	dur("PAYSERVER_CHANNEL_TIMEOUT", &cfg.ChannelTimeout)
	dur("PAYSERVER_SHUTDOWN_TIMEOUT", &cfg.ShutdownTimeout)
	dur("PAYSERVER_ORDER_STALE_AFTER", &cfg.OrderStaleAfter)
	dur("PAYSERVER_STATS_FLUSH_INTERVAL", &cfg.Stats.FlushInterval)
	if v := getenv("PAYSERVER_CHANNELS"); v != "" {
		chs := map[string]channel.SimulatorConfig{}
		for _, code := range splitList(v) {
			chs[code] = cfg.Channels[code]
		}
		cfg.Channels = chs
	}
	return errors.Join(errs...)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Validate checks the settings that have no safe default.
func (c Config) Validate() error {
	var errs []error
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("httpAddr is empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("dataDir is empty"))
	}
	if len(c.Nacos.Addrs) == 0 && c.LimitsFile == "" {
		errs = append(errs, errors.New("neither a limits file nor a Nacos address is set"))
	}
	if _, err := ratelimit.ParsePolicy(c.Limiter.Policy); err != nil {
		errs = append(errs, err)
	}
	if u := c.Limiter.Unconfigured; u != "" && u != "allow" && u != "deny" {
		errs = append(errs, fmt.Errorf("PAYSERVER_LIMITS_DEFAULT_POLICY %q: want allow or deny", u))
	}
	if c.Limiter.InstanceCount < 1 {
		errs = append(errs, errors.New("PAYSERVER_INSTANCE_COUNT must be at least 1"))
	}
	if c.DBMaxBatch < 0 || c.DBMaxBatch > 64 {
		errs = append(errs, errors.New("PAYSERVER_DB_MAX_BATCH must be in [0, 64] (0 = 64)"))
	}
	if c.Limiter.MaxBatch < 0 || c.Limiter.MaxBatch > 1000 {
		errs = append(errs, errors.New("PAYSERVER_LIMITER_MAX_BATCH must be in [0, 1000] (0 = 128)"))
	}
	if c.Limiter.LocalShare < 0 || c.Limiter.LocalShare > 1 {
		errs = append(errs, errors.New("PAYSERVER_LIMITER_LOCAL_SHARE must be in (0, 1]"))
	}
	if c.Limiter.Timeout <= 0 || c.ChannelTimeout <= 0 || c.ShutdownTimeout <= 0 || c.Stats.FlushInterval <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
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
	if c.PprofAddr != "" && !isLoopback(c.PprofAddr) {
		errs = append(errs, fmt.Errorf("PAYSERVER_PPROF_ADDR %q: must be a loopback host:port", c.PprofAddr))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// isLoopback reports whether addr is host:port with a loopback IP host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
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
	redis := "embedded"
	if len(c.RedisAddrs) > 0 {
		redis = strings.Join(c.RedisAddrs, ",")
	}
	db := "sqlite " + filepath.Join(c.DataDir, "payserver.db")
	if c.MySQLDSN != "" {
		db = "mysql " + redactDSN(c.MySQLDSN)
	}
	limits := "file " + c.LimitsFile
	if len(c.Nacos.Addrs) > 0 {
		limits = "nacos " + strings.Join(c.Nacos.Addrs, ",") + " " + c.Nacos.Group + "/" + c.Nacos.DataID
	}
	return slog.GroupValue(
		slog.String("httpAddr", c.HTTPAddr), slog.String("dataDir", c.DataDir),
		slog.String("db", db), slog.String("redis", redis), slog.String("limits", limits),
		slog.String("policy", c.Limiter.Policy), slog.Bool("adminToken", c.AdminToken != ""),
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

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
