package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// RedisMode is how payserver reaches Redis.
type RedisMode string

const (
	// RedisEmbedded runs the in-process Redis-protocol server (no address
	// set). It is never configured by name.
	RedisEmbedded RedisMode = "embedded"
	// RedisStandalone is one server at the one address.
	RedisStandalone RedisMode = "standalone"
	// RedisCluster is a Redis Cluster reached through its seed addresses.
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a master and its replicas under Redis Sentinel: the
	// sentinels name the master, and name the new one after a failover.
	RedisSentinel RedisMode = "sentinel"
)

// UnmarshalText accepts standalone, cluster or sentinel.
func (m *RedisMode) UnmarshalText(b []byte) error {
	switch v := RedisMode(b); v {
	case RedisStandalone, RedisCluster, RedisSentinel:
		*m = v
		return nil
	default:
		return fmt.Errorf("redis mode %q: want standalone, cluster or sentinel", b)
	}
}

// LogFormat is the slog handler payserver logs with.
type LogFormat string

const (
	// LogText is slog's key=value text handler.
	LogText LogFormat = "text"
	// LogJSON is slog's JSON handler, one object a line.
	LogJSON LogFormat = "json"
)

// UnmarshalText accepts text or json.
func (f *LogFormat) UnmarshalText(b []byte) error {
	switch v := LogFormat(b); v {
	case LogText, LogJSON:
		*f = v
		return nil
	default:
		return fmt.Errorf("log format %q: want text or json", b)
	}
}

// TLSFiles configures a TLS client connection from PEM files. The zero
// value is TLS off.
type TLSFiles struct {
	// Enabled turns TLS on with the system's roots when no CA is given.
	// Setting CA or Cert turns it on too.
	Enabled bool `yaml:"enabled"`
	// CA is the PEM file of the authorities that sign the server's
	// certificate; empty means the system's roots.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate and its key (PEM), for
	// servers that require client certificates; both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name the server's certificate must carry; empty
	// means the host of the address dialled.
	ServerName string `yaml:"serverName"`
}

// On reports whether TLS is to be used.
func (f TLSFiles) On() bool { return f.Enabled || f.CA != "" || f.Cert != "" }

func (f TLSFiles) validate(prefix string) error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%s_CERT and %s_KEY go together: set both or neither", prefix, prefix)
	}
	return nil
}

// Config loads the files into a tls.Config (TLS 1.2 at least). prefix names
// the settings in errors, e.g. PAYSERVER_REDIS_TLS.
func (f TLSFiles) Config(prefix string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s_CA: %w", prefix, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s_CA %s: no PEM certificate in it", prefix, f.CA)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s_CERT/%s_KEY: %w", prefix, prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// tlsTrustError explains a failed TLS handshake caused by the server's
// certificate (wrong CA, wrong name, expired), naming the settings to fix;
// nil for any other error.
func tlsTrustError(err error, what, prefix string, f TLSFiles) error {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		ca := f.CA
		if ca == "" {
			ca = "the system roots"
		}
		return fmt.Errorf("%s TLS: the server's certificate is not signed by the CA in %s_CA (%s): %w", what, prefix, ca, err)
	case errors.As(err, &host):
		return fmt.Errorf("%s TLS: the server's certificate is not valid for the name dialled; set %s_SERVER_NAME: %w", what, prefix, err)
	case errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("%s TLS: the server's certificate was refused (%s_CA %q): %w", what, prefix, f.CA, err)
	}
	return nil
}
