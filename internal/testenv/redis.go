package testenv

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions configure StartRedis. The zero value is a server without
// persistence, password or TLS.
type RedisOptions struct {
	// Password, when set, is required of every client (requirepass).
	Password string
	// User and UserPassword, when set, turn the default user off and add
	// this ACL user with every permission.
	User, UserPassword string
	// TLS, when set, makes the server TLS-only (no plain port) and requires
	// client certificates signed by its CA.
	TLS *Certs
	// Args are further redis-server arguments, e.g. "--cluster-enabled", "yes".
	Args []string
}

// Redis is one redis-server (or sentinel) process.
type Redis struct {
	// Addr is the server's host:port on loopback.
	Addr string
	// Dir holds its data, configuration and log (redis.log).
	Dir string

	tb     TB
	opts   RedisOptions
	tlsCfg *tls.Config // the client side of opts.TLS
	p      *proc
}

// StartRedis starts a standalone redis-server on a free loopback port under
// tb.TempDir() and returns once it answers PING; it is killed at tb's
// cleanup.
func StartRedis(tb TB, opts RedisOptions) *Redis {
	tb.Helper()
	r := newRedis(tb, opts, "redis")
	r.Start()
	return r
}

// newRedis prepares a redis-server on a free port without starting it;
// offsets are other ports it opens, relative to its own, that must be free
// too (a cluster node's bus, +10000).
func newRedis(tb TB, opts RedisOptions, name string, offsets ...int) *Redis {
	tb.Helper()
	bin := Binary(tb, "redis-server")
	port := FreePort(tb, offsets...)
	dir := tb.TempDir()
	r := &Redis{Addr: addr(port), Dir: dir, tb: tb, opts: opts}
	if opts.TLS != nil {
		cfg, err := opts.TLS.ClientTLS()
		if err != nil {
			tb.Fatalf("testenv: TLS client configuration: %v", err)
		}
		cfg.ServerName = Host
		r.tlsCfg = cfg
	}
	// A replica's full sync starts at once (Redis waits 5 s by default for
	// more replicas to share a diskless transfer).
	args := []string{bin, "--bind", Host, "--protected-mode", "yes", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "", "--repl-diskless-sync-delay", "0"}
	p := strconv.Itoa(port)
	if opts.TLS != nil {
		args = append(args, "--port", "0", "--tls-port", p,
			"--tls-cert-file", opts.TLS.ServerCert, "--tls-key-file", opts.TLS.ServerKey,
			"--tls-ca-cert-file", opts.TLS.CA, "--tls-auth-clients", "yes")
	} else {
		args = append(args, "--port", p)
	}
	if opts.Password != "" {
		args = append(args, "--requirepass", opts.Password)
	}
	if opts.User != "" {
		args = append(args, "--user", "default", "off", "--user", opts.User, "on", ">"+opts.UserPassword, "~*", "&*", "+@all")
	}
	args = append(args, opts.Args...)
	r.p = &proc{name: name + " " + r.Addr, args: args, dir: dir, log: filepath.Join(dir, "redis.log")}
	tb.Cleanup(func() { r.p.stop(syscall.SIGKILL, 5*time.Second) })
	return r
}

// Options returns client options for the server: its address, password or
// ACL user, and TLS with the client certificate.
func (r *Redis) Options() *redis.Options {
	o := &redis.Options{Addr: r.Addr, Password: r.opts.Password, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1}
	if r.opts.User != "" {
		o.Username, o.Password = r.opts.User, r.opts.UserPassword
	}
	if r.tlsCfg != nil {
		o.TLSConfig = r.tlsCfg.Clone()
	}
	return o
}

// Start starts the server (again: same port, data dir and arguments) and
// waits until it answers PING; it fails tb otherwise.
func (r *Redis) Start() {
	r.tb.Helper()
	p := r.p
	if err := p.start(); err != nil {
		p.fail(r.tb, err)
	}
	if err := p.waitReady(30*time.Second, r.ping); err != nil {
		p.fail(r.tb, err)
	}
}

func (r *Redis) ping() error {
	c := redis.NewClient(r.Options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// Kill sends SIGKILL, as a crash would, and waits until the process is gone.
func (r *Redis) Kill() { r.p.stop(syscall.SIGKILL, 5*time.Second) }

// Stop sends SIGTERM and waits until the process is gone (SIGKILL after 10 s).
func (r *Redis) Stop() { r.p.stop(syscall.SIGTERM, 10*time.Second) }

// Pause stops the process (SIGSTOP) without ending it: it holds its
// connections but answers nothing until Resume.
func (r *Redis) Pause() {
	r.tb.Helper()
	if err := r.p.signal(syscall.SIGSTOP); err != nil {
		r.tb.Fatalf("testenv: pause %s: %v", r.Addr, err)
	}
}

// Resume continues a paused process (SIGCONT).
func (r *Redis) Resume() { _ = r.p.signal(syscall.SIGCONT) }

// Pid returns the process id of the last start.
func (r *Redis) Pid() int { return r.p.pid() }
