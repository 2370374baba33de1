package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// dialer opens the connections of one gateway's transport. Every error it
// returns is a *dialError: it was raised before a connection existed, so
// no request can have been written on it.
type dialer struct {
	// connect opens a TCP connection; a net.Dialer's DialContext outside
	// tests.
	connect func(ctx context.Context, network, addr string) (net.Conn, error)
	// timeout bounds the connect and the TLS handshake together.
	timeout time.Duration
	// tls, for https, is the connection's TLS settings; nil for http.
	tls *tls.Config
}

func newDialer(timeout time.Duration, tlsCfg *tls.Config) *dialer {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return &dialer{connect: d.DialContext, timeout: timeout, tls: tlsCfg}
}

// dialError is an error raised while establishing a connection: refused,
// timed out, a DNS failure, a failed TLS handshake. No HTTP request had a
// connection yet.
type dialError struct {
	stage string // "connect" or "TLS handshake"
	err   error
}

func (e *dialError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dial opens a plain connection (http).
func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.open(ctx, network, addr)
}

// dialTLS opens a connection and completes its TLS handshake (https).
func (d *dialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := d.open(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			conn.Close()
			return nil, &dialError{stage: "TLS handshake", err: err}
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, &dialError{stage: "TLS handshake", err: err}
	}
	return tc, nil
}

func (d *dialer) open(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.connect(ctx, network, addr)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, &dialError{stage: "connect", err: err}
	}
	return conn, nil
}
