package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"payserver/internal/repo"
)

// This file opens the backends: the database and Redis.

// mysqlTLSName is the name payserver registers its MySQL TLS config under
// in the driver (the DSN's tls= parameter refers to it).
const mysqlTLSName = "payserver"

func (m *Main) openDB(ctx context.Context) error {
	opts, err := dbOpenOptions(m.cfg, m.log.With("component", "db"))
	if err != nil {
		return err
	}
	m.log.Info("database backend", "driver", string(opts.Driver), "tls", m.cfg.MySQLTLS.On())
	db, err := openDatabase(ctx, m.cfg, opts)
	if err != nil {
		return err
	}
	m.db = db
	if m.cfg.AutoMigrate || opts.Driver == repo.SQLite {
		if _, err := repo.Migrate(ctx, db, opts.Driver); err != nil {
			return err
		}
	}
	// Reading only: a database without tables leaves the server running,
	// not ready, and says so once here.
	m.schema = newSchemaCheck(func(ctx context.Context) (repo.Schema, error) {
		return repo.ReadSchema(ctx, db, opts.Driver)
	}, time.Now, m.log.With("component", "db"))
	m.schema.Check(ctx)
	return nil
}

// dbOpenOptions says how to open the configured database: MySQL (over TLS
// when PAYSERVER_MYSQL_TLS_* is set), or the embedded SQLite file in the
// data dir. Serving, `migrate` and `report` all open it this way.
func dbOpenOptions(cfg Config, log *slog.Logger) (repo.OpenOptions, error) {
	if cfg.MySQLDSN == "" {
		return repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(cfg.DataDir, "payserver.db"), Logger: log}, nil
	}
	opts := repo.OpenOptions{Driver: repo.MySQL, DSN: cfg.MySQLDSN, Logger: log}
	if cfg.MySQLTLS.On() {
		dsn, err := mysqlTLSDSN(cfg.MySQLDSN, cfg.MySQLTLS)
		if err != nil {
			return repo.OpenOptions{}, err
		}
		opts.DSN = dsn
	}
	return opts, nil
}

// openDatabase opens opts; a server certificate the configured CA does not
// vouch for is reported as such, naming the setting.
func openDatabase(ctx context.Context, cfg Config, opts repo.OpenOptions) (*gorm.DB, error) {
	db, err := repo.Open(ctx, opts)
	if err != nil {
		if terr := tlsTrustError(err, "mysql", "PAYSERVER_MYSQL_TLS", cfg.MySQLTLS); terr != nil {
			return nil, terr
		}
		return nil, err
	}
	return db, nil
}

// mysqlTLSDSN registers the TLS config of files with the driver and returns
// dsn with tls= pointing at it. A DSN that already names a tls mode is
// refused: two places would say how to connect.
func mysqlTLSDSN(dsn string, files TLSFiles) (string, error) {
	dcfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("PAYSERVER_MYSQL_DSN: %w", err)
	}
	if dcfg.TLSConfig != "" && dcfg.TLSConfig != "false" {
		return "", fmt.Errorf("PAYSERVER_MYSQL_DSN has tls=%s and PAYSERVER_MYSQL_TLS_* is set: use one of them", dcfg.TLSConfig)
	}
	tcfg, err := files.Config("PAYSERVER_MYSQL_TLS")
	if err != nil {
		return "", err
	}
	if tcfg.ServerName == "" {
		host := dcfg.Addr
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		tcfg.ServerName = host
	}
	if err := mysqldriver.RegisterTLSConfig(mysqlTLSName, tcfg); err != nil {
		return "", err
	}
	dcfg.TLSConfig = mysqlTLSName
	return dcfg.FormatDSN(), nil
}

// openRedis connects to the configured Redis (standalone, Cluster or
// through Sentinel), or starts the embedded Redis-protocol server so that
// the same Lua path runs. It then checks what it reached (checkRedis).
func (m *Main) openRedis(ctx context.Context) error {
	mode, inferred := m.cfg.EffectiveRedisMode()
	opts, err := m.redisOptions()
	if err != nil {
		return err
	}
	switch mode {
	case RedisEmbedded:
		// No server: the limiter keeps its windows in process, journaled
		// in the data dir (buildLimiter), so they survive a restart.
		m.log.Info("redis backend", "mode", mode, "journal", m.limiterJournal(),
			"note", "embedded mode is single-instance: the data dir is locked, one process per data dir")
		return nil
	case RedisStandalone:
		m.redis = redis.NewClient(opts.Simple())
	case RedisCluster:
		// go-redis re-reads slot ownership only after MOVED/ASK or when its
		// copy is older than this (default 60 s). A dead master refuses
		// connections, which triggers neither, so without a short interval
		// payserver kept routing to it long after its replica took over.
		copts := opts.Cluster()
		copts.ClusterStateReloadInterval = time.Second
		m.redis = redis.NewClusterClient(copts)
	case RedisSentinel:
		// The failover client asks the sentinels for the master, follows
		// their +switch-master announcements, and drops its connections to
		// the old master when they name a new one.
		m.redis = redis.NewFailoverClient(opts.Failover())
	}
	m.log.Info("redis backend", "mode", mode, "modeInferred", inferred, "addrs", opts.Addrs,
		"master", m.cfg.RedisMaster, "tls", m.cfg.RedisTLS.On(), "username", m.cfg.RedisUsername)
	if inferred {
		m.log.Warn("PAYSERVER_REDIS_MODE is not set; inferred from the number of addresses (set it: standalone, cluster or sentinel)", "mode", mode)
	}
	m.persistence = newRedisPersistence(configGet(func(ctx context.Context, name string) (map[string]string, error) {
		return m.redis.ConfigGet(ctx, name).Result()
	}), func() bool { return m.limiter != nil && hasCalendarWindow(m.limiter.Config()) }, time.Now, m.log.With("component", "redis"))
	m.restarts = newRedisRestarts(redisRunIDs(m.redis), func() bool { return m.limiter != nil && hasCalendarWindow(m.limiter.Config()) },
		time.Now, m.log.With("component", "redis"))
	if err := m.checkRedis(ctx, mode); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if st := m.persistence.State(rctx, true); st.Known {
		m.log.Info("redis persistence", "keepsData", st.Keeps, "settings", st.Settings)
	} else {
		m.log.Info("redis persistence", "unknown", st.Unknown)
	}
	m.restarts.Check(rctx) // the run id payserver starts with
	m.goBackground(func() { m.restarts.Run(ctx) })
	return nil
}

func (m *Main) redisOptions() (*redis.UniversalOptions, error) {
	opts := &redis.UniversalOptions{
		Addrs:                 m.cfg.RedisAddrs,
		Username:              m.cfg.RedisUsername,
		Password:              m.cfg.RedisPassword,
		MasterName:            m.cfg.RedisMaster,
		SentinelUsername:      m.cfg.RedisSentinelUsername,
		SentinelPassword:      m.cfg.RedisSentinelPassword,
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		ContextTimeoutEnabled: true,
		PoolSize:              128,
		MinIdleConns:          8,
		PoolTimeout:           100 * time.Millisecond,
		// No client-side retries: a retry after a read timeout or EOF may
		// follow a script that ran, and its error (a dial error, MOVED,
		// CLUSTERDOWN…) would then hide that the outcome is unknown. The
		// limiter retries a check itself, with the same member
		// (ratelimit.Limiter's unknown-outcome handling).
		MaxRetries: -1,
		// One dial attempt per call: go-redis's own dial retries (5, 100 ms
		// apart) outlast the limiter's deadline, so a refused connection,
		// which provably never ran the script, ended as a deadline, an
		// unknown outcome (503) instead of a decision in process
		// (ratelimit TestRefusedDialIsDecidedInProcess).
		DialerRetries: 1,
	}
	if m.cfg.RedisMode == RedisSentinel {
		opts.Addrs = m.cfg.RedisSentinels
	}
	if m.cfg.RedisTLS.On() {
		tcfg, err := m.cfg.RedisTLS.Config("PAYSERVER_REDIS_TLS")
		if err != nil {
			return nil, err
		}
		opts.TLSConfig = tcfg
	}
	return opts, nil
}

// checkRedis pings Redis once at start. A server certificate the CA does not
// vouch for, and a server that is not of the configured mode (one seed node
// of a Cluster taken for a standalone server, or the reverse), refuse the
// start with the setting to fix. A server that does not answer yet only
// warns: the limiter degrades until it does.
func (m *Main) checkRedis(ctx context.Context, mode RedisMode) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := m.redis.Ping(ctx).Err()
	switch {
	case err == nil:
	case tlsTrustError(err, "redis", "PAYSERVER_REDIS_TLS", m.cfg.RedisTLS) != nil:
		return tlsTrustError(err, "redis", "PAYSERVER_REDIS_TLS", m.cfg.RedisTLS)
	case mode == RedisCluster && strings.Contains(err.Error(), "cluster support disabled"):
		return fmt.Errorf("PAYSERVER_REDIS_MODE is cluster but %v is not a Cluster node: set PAYSERVER_REDIS_MODE=standalone (%w)", m.cfg.RedisAddrs, err)
	default:
		m.log.Warn("redis does not answer at start; the limiter decides by its policy until it does", "err", err)
		return nil
	}
	if mode != RedisStandalone {
		return nil
	}
	info, err := m.redis.Info(ctx, "cluster").Result()
	if err == nil && strings.Contains(info, "cluster_enabled:1") {
		return errors.New("PAYSERVER_REDIS_ADDR " + m.cfg.RedisAddrs[0] + " is a Redis Cluster node, not a standalone server: " +
			"set PAYSERVER_REDIS_MODE=cluster and list the seed nodes in PAYSERVER_REDIS_ADDR")
	}
	return nil
}

// limiterJournal is the file the embedded limiter journals its windows to.
func (m *Main) limiterJournal() string { return filepath.Join(m.cfg.DataDir, "limiter.journal") }
