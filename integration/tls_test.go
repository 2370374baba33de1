package integration

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

// clientTLS trusts the throwaway CA and presents the client certificate.
func clientTLS(t *testing.T, f *testenv.Certs) *tls.Config {
	t.Helper()
	cfg, err := f.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startMustFail runs payserver with env (over the harness defaults) and
// returns its output; it fails the test unless the process exits non-zero
// within 30 s.
func startMustFail(t *testing.T, env map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	full := map[string]string{
		"PAYSERVER_HTTP_ADDR":   freePort(t),
		"PAYSERVER_DATA_DIR":    filepath.Join(dir, "data"),
		"PAYSERVER_LOG_FORMAT":  "json",
		"PAYSERVER_CONFIG":      "/dev/null",
		"PAYSERVER_LIMITS_FILE": filepath.Join(dir, "limits.yaml"),
	}
	mustWrite(t, full["PAYSERVER_LIMITS_FILE"], "limits:\n  ONLINE_PAY:ALIPAY: 10\n")
	for k, v := range env {
		full[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fastBinary)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range full {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("payserver still running after 30 s; want a refused start:\n%s", out)
	}
	if err == nil {
		t.Fatalf("payserver exited 0; want a refused start:\n%s", out)
	}
	return string(out)
}

// TestRedisTLSWithACLUser: payserver limits exactly through a TLS-only Redis
// (client certificate required, default user off) as an ACL user, and a CA
// that did not sign the server's certificate refuses the start with a
// message naming TLS and the CA setting.
func TestRedisTLSWithACLUser(t *testing.T) {
	f := testenv.NewCerts(t)
	const user, pass = "payserver", "payserver-tls"
	addr := testenv.StartRedis(t, testenv.RedisOptions{TLS: f, User: user, UserPassword: pass}).Addr
	env := map[string]string{
		"PAYSERVER_REDIS_MODE": "standalone", "PAYSERVER_REDIS_ADDR": addr,
		"PAYSERVER_REDIS_USERNAME": user, "PAYSERVER_REDIS_PASSWORD": pass,
		"PAYSERVER_REDIS_TLS_CA": f.CA, "PAYSERVER_REDIS_TLS_CERT": f.ClientCert, "PAYSERVER_REDIS_TLS_KEY": f.ClientKey,
	}

	t.Run("limits exactly", func(t *testing.T) {
		biz := testutil.UniqueName("TLS")
		const limit = 5
		s := startServer(t, serverOptions{Env: env, Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: %d, window: 1m}]\n", biz, limit)})
		got := map[int]int{}
		for i := 0; i < 2*limit; i++ {
			got[s.pay(t, payBody(fmt.Sprintf("tls-%d", i), biz, "ALIPAY")).Status]++
		}
		if got[200] != limit || got[429] != limit {
			t.Fatalf("got statuses %v, want %d × 200 and %d × 429", got, limit, limit)
		}
		if n := s.metric(t, "payserver_limiter_decisions_total", `source="redis"`, `result="admitted"`); n != limit {
			t.Fatalf("got %v admissions by Redis, want %d: the limiter did not decide on the TLS Redis", n, limit)
		}
		c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pass, TLSConfig: clientTLS(t, f)})
		defer c.Close()
		rs, err := redisstore.New(c, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		key := rs.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: biz, Channel: "ALIPAY"}, Window: ratelimit.Window{Limit: limit, Size: time.Minute}})
		if n, err := c.ZCard(context.Background(), key).Result(); err != nil || n != limit {
			t.Fatalf("got %d members in %s on the TLS Redis (err %v), want %d", n, key, err, limit)
		}
	})

	t.Run("wrong CA refuses the start", func(t *testing.T) {
		bad := map[string]string{}
		for k, v := range env {
			bad[k] = v
		}
		bad["PAYSERVER_REDIS_TLS_CA"] = f.WrongCA
		bad["PAYSERVER_MYSQL_DSN"] = ""
		out := startMustFail(t, bad)
		for _, want := range []string{"redis TLS", "PAYSERVER_REDIS_TLS_CA", f.WrongCA, "unknown authority"} {
			if !strings.Contains(out, want) {
				t.Errorf("start-up output lacks %q:\n%s", want, out)
			}
		}
	})
}

// freshTLSDatabase creates an empty database on the TLS MariaDB (over TLS:
// its user requires it) and returns its DSN without TLS parameters.
func freshTLSDatabase(t *testing.T, f *testenv.Certs, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	admin.TLS = clientTLS(t, f)
	admin.TLS.ServerName = "127.0.0.1"
	conn, err := mysql.NewConnector(admin)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	name := "payserver_" + strings.ToLower(testutil.UniqueName("tls"))
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create %s on the TLS MariaDB: %v", name, err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS " + name) })
	var cipher string
	if err := db.QueryRow("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'").Scan(&cipher); err != nil || cipher == "" {
		t.Fatalf("the test's own connection is not TLS (Ssl_cipher %q, %v)", cipher, err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// TestMySQLTLS: `payserver migrate` and the server run on a MariaDB whose
// user requires TLS, through PAYSERVER_MYSQL_TLS_*; without them the server refuses the
// login, and with the wrong CA the start fails naming TLS and the CA.
func TestMySQLTLS(t *testing.T) {
	f := testenv.NewCerts(t)
	dsn := freshTLSDatabase(t, f, testenv.StartMariaDB(t, testenv.MariaDBOptions{TLS: f}).DSN)
	tlsEnv := map[string]string{
		"PAYSERVER_MYSQL_TLS_CA": f.CA, "PAYSERVER_MYSQL_TLS_CERT": f.ClientCert, "PAYSERVER_MYSQL_TLS_KEY": f.ClientKey,
	}

	t.Run("migrate over TLS", func(t *testing.T) {
		cmd := exec.Command(fastBinary, "migrate")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PAYSERVER_CONFIG=/dev/null",
			"PAYSERVER_DATA_DIR=" + t.TempDir(), "PAYSERVER_MYSQL_DSN=" + dsn}
		for k, v := range tlsEnv {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("payserver migrate over TLS: %v\n%s", err, out)
		}
	})
	t.Run("serves over TLS", func(t *testing.T) {
		s := startServer(t, serverOptions{DSN: dsn, Env: tlsEnv})
		if r := s.pay(t, payBody(testutil.UniqueName("tls-pay"), "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
			t.Fatalf("got %d %s, want 200", r.Status, r.Body)
		}
	})
	t.Run("no TLS is refused by the server", func(t *testing.T) {
		out := startMustFail(t, map[string]string{"PAYSERVER_MYSQL_DSN": dsn, "PAYSERVER_AUTO_MIGRATE": "true"})
		if !strings.Contains(out, "Access denied") {
			t.Errorf("want the server's refusal of a plain connection:\n%s", out)
		}
	})
	t.Run("wrong CA refuses the start", func(t *testing.T) {
		env := map[string]string{"PAYSERVER_MYSQL_DSN": dsn, "PAYSERVER_AUTO_MIGRATE": "true",
			"PAYSERVER_MYSQL_TLS_CA": f.WrongCA, "PAYSERVER_MYSQL_TLS_CERT": f.ClientCert, "PAYSERVER_MYSQL_TLS_KEY": f.ClientKey}
		out := startMustFail(t, env)
		for _, want := range []string{"mysql TLS", "PAYSERVER_MYSQL_TLS_CA", "unknown authority"} {
			if !strings.Contains(out, want) {
				t.Errorf("start-up output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestRedisModeRefusesClusterNodeAsStandalone: one address of a Redis
// Cluster node is never used as a standalone server, whether the mode is
// inferred (PAYSERVER_REDIS_MODE unset) or set to standalone, nor a
// standalone server as a Cluster: the start is refused with the fix.
func TestRedisModeRefusesClusterNodeAsStandalone(t *testing.T) {
	addr := testenv.StartRedis(t, testenv.RedisOptions{Args: []string{"--cluster-enabled", "yes"}}).Addr
	for _, mode := range []string{"", "standalone"} {
		t.Run("mode="+mode, func(t *testing.T) {
			out := startMustFail(t, map[string]string{"PAYSERVER_REDIS_ADDR": addr, "PAYSERVER_REDIS_MODE": mode})
			if !strings.Contains(out, "is a Redis Cluster node") || !strings.Contains(out, "PAYSERVER_REDIS_MODE=cluster") {
				t.Errorf("start-up output does not say the address is a Cluster node and how to fix it:\n%s", out)
			}
		})
	}
	// The reverse: a standalone server named as a Cluster.
	t.Run("cluster mode on a standalone server", func(t *testing.T) {
		out := startMustFail(t, map[string]string{"PAYSERVER_REDIS_ADDR": testutil.RedisAddr(t), "PAYSERVER_REDIS_MODE": "cluster"})
		if !strings.Contains(out, "is not a Cluster node") || !strings.Contains(out, "PAYSERVER_REDIS_MODE=standalone") {
			t.Errorf("start-up output does not say the address is not a Cluster node and how to fix it:\n%s", out)
		}
	})
}
