package testenv

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBOptions configure StartMariaDB. The zero value is the tests'
// server: commits flushed to the OS but fsynced once a second
// (innodb_flush_log_at_trx_commit=2), no binary log, a 128 MB buffer pool.
type MariaDBOptions struct {
	// Durable runs it the way a payments database runs, for benchmarks:
	// every commit fsynced (innodb_flush_log_at_trx_commit=1), binary log
	// on with sync_binlog=1 (ROW), a 256 MB buffer pool.
	Durable bool
	// TLS, when set, turns TLS on with these certificates, and the payserver
	// user must connect over it (REQUIRE SSL).
	TLS *Certs
}

// MariaDB is one mariadbd with a database payserver and a user
// payserver/payserver that has every privilege on payserver and on
// payserver\_% (tests create databases of their own); root has no
// password and logs in over the Unix socket.
type MariaDB struct {
	// Addr is the TCP host:port on loopback.
	Addr string
	// DSN is the payserver user's, on database payserver (parseTime,
	// loc=UTC, multiStatements; no TLS parameters).
	DSN string
	// AdminDSN is DSN without a database.
	AdminDSN string
	// RootDSN is root's, over the Unix socket, without a database.
	RootDSN string
	// Dir holds the data dir (data) and the log (mariadbd.log).
	Dir string

	tb   TB
	opts MariaDBOptions
	p    *proc
}

// StartMariaDB starts mariadbd on a free loopback port with a data dir
// under tb.TempDir(), copied from a template that mariadb-install-db makes
// once per MariaDB version (kept in the user's cache dir), and returns
// once the payserver user's DSN answers SELECT 1.
func StartMariaDB(tb TB, opts MariaDBOptions) *MariaDB {
	tb.Helper()
	bin := Binary(tb, "mariadbd")
	install := Binary(tb, "mariadb-install-db")
	tmpl, err := mariadbTemplate(bin, install)
	if err != nil {
		tb.Fatalf("testenv: MariaDB template data dir: %v", err)
	}
	dir := tb.TempDir()
	data := filepath.Join(dir, "data")
	if err := copyTree(tmpl, data); err != nil {
		tb.Fatalf("testenv: copy the MariaDB template: %v", err)
	}
	sock := filepath.Join(dir, "mariadbd.sock")
	if len(sock) > 100 { // sun_path holds 108 bytes
		short, err := os.MkdirTemp("", "mdb-")
		if err != nil {
			tb.Fatalf("testenv: %v", err)
		}
		tb.Cleanup(func() { _ = os.RemoveAll(short) })
		sock = filepath.Join(short, "s.sock")
	}
	port := FreePort(tb)
	m := &MariaDB{Addr: addr(port), Dir: dir, tb: tb, opts: opts}
	q := "?parseTime=true&loc=UTC&multiStatements=true"
	m.DSN = "payserver:payserver@tcp(" + m.Addr + ")/payserver" + q
	m.AdminDSN = "payserver:payserver@tcp(" + m.Addr + ")/" + q
	m.RootDSN = "root@unix(" + sock + ")/" + q
	args := []string{bin, "--no-defaults", "--datadir=" + data, "--socket=" + sock,
		"--pid-file=" + filepath.Join(dir, "mariadbd.pid"), "--port=" + strconv.Itoa(port),
		"--bind-address=" + Host, "--skip-name-resolve",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci", "--default-time-zone=+00:00",
		"--max-connections=500"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if opts.Durable {
		args = append(args, "--innodb-buffer-pool-size=256M", "--innodb-log-file-size=96M",
			"--innodb-flush-log-at-trx-commit=1", "--log-bin="+filepath.Join(data, "binlog"), "--server-id=1",
			"--sync-binlog=1", "--binlog-format=ROW")
	} else {
		args = append(args, "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=32M", "--innodb-flush-log-at-trx-commit=2")
	}
	if opts.TLS != nil {
		args = append(args, "--ssl-ca="+opts.TLS.CA, "--ssl-cert="+opts.TLS.ServerCert, "--ssl-key="+opts.TLS.ServerKey)
	}
	m.p = &proc{name: "mariadbd " + m.Addr, args: args, dir: dir, log: filepath.Join(dir, "mariadbd.log")}
	tb.Cleanup(func() { m.p.stop(syscall.SIGKILL, 5*time.Second) })
	m.Start()
	return m
}

// Start starts mariadbd (again: same port and data dir), makes sure the
// payserver database and user exist, and waits until the payserver user's
// DSN answers; it fails tb otherwise.
func (m *MariaDB) Start() {
	m.tb.Helper()
	if err := m.p.start(); err != nil {
		m.p.fail(m.tb, err)
	}
	if err := m.p.waitReady(90*time.Second, func() error { return pingDSN(m.RootDSN, nil) }); err != nil {
		m.p.fail(m.tb, err)
	}
	if err := m.setup(); err != nil {
		m.p.fail(m.tb, fmt.Errorf("creating the payserver database and user: %w", err))
	}
	if err := m.p.waitReady(30*time.Second, m.Ping); err != nil {
		m.p.fail(m.tb, err)
	}
}

func (m *MariaDB) setup() error {
	require := ""
	if m.opts.TLS != nil {
		require = " REQUIRE SSL"
	}
	var b strings.Builder
	b.WriteString("CREATE DATABASE IF NOT EXISTS `payserver` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;\n")
	for _, host := range []string{Host, "localhost"} {
		fmt.Fprintf(&b, "CREATE USER IF NOT EXISTS 'payserver'@'%s' IDENTIFIED BY 'payserver'%s;\n", host, require)
		fmt.Fprintf(&b, "GRANT ALL PRIVILEGES ON `payserver`.* TO 'payserver'@'%s';\n", host)
		fmt.Fprintf(&b, "GRANT ALL PRIVILEGES ON `payserver\\_%%`.* TO 'payserver'@'%s';\n", host)
	}
	db, err := sql.Open("mysql", m.RootDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, b.String())
	return err
}

// Ping runs SELECT 1 as the payserver user (over TLS with the client
// certificate when the server has TLS).
func (m *MariaDB) Ping() error {
	if m.opts.TLS == nil {
		return pingDSN(m.DSN, nil)
	}
	cfg, err := m.opts.TLS.ClientTLS()
	if err != nil {
		return err
	}
	cfg.ServerName = Host
	return pingDSN(m.DSN, cfg)
}

// Kill sends SIGKILL, as a crash would, and waits until mariadbd is gone.
func (m *MariaDB) Kill() { m.p.stop(syscall.SIGKILL, 5*time.Second) }

// Stop shuts mariadbd down (SIGTERM; SIGKILL after 60 s) and waits until it
// is gone.
func (m *MariaDB) Stop() { m.p.stop(syscall.SIGTERM, 60*time.Second) }

// Pid returns mariadbd's process id.
func (m *MariaDB) Pid() int { return m.p.pid() }

// pingDSN opens dsn (with tlsCfg, when set) and runs SELECT 1.
func pingDSN(dsn string, tlsCfg *tls.Config) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	if tlsCfg != nil {
		cfg.TLS = tlsCfg
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

var templateMu sync.Mutex

// mariadbTemplate returns a data dir made by mariadb-install-db for this
// mariadbd's version, making it if needed. Templates live in the user's
// cache dir and are never changed once made (made under a temporary name
// and renamed), so checkouts and concurrent runs can share them.
func mariadbTemplate(bin, install string) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	version, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	installArgs := []string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-log-file-size=4M"}
	if os.Geteuid() == 0 {
		installArgs = append(installArgs, "--user=root")
	}
	sum := sha256.Sum256([]byte(string(version) + strings.Join(installArgs, " ")))
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	base = filepath.Join(base, "payserver-testenv")
	dir := filepath.Join(base, "mariadb-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "mysql")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, "making-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	data := filepath.Join(tmp, "data")
	out, err := exec.Command(install, append(installArgs, "--datadir="+data)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Rename(data, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "mysql")); serr == nil {
			return dir, nil // made by someone else meanwhile
		}
		return "", err
	}
	return dir, nil
}

// copyTree copies the regular files and directories under from to to.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if !d.Type().IsRegular() {
			return errors.New("not a regular file: " + path)
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
