package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeTestCA writes a self-signed CA certificate (PEM) and returns its path.
func writeTestCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRedisOptionsEveryMode: the TLS config, the ACL user and (Sentinel) the
// sentinels' credentials reach the client options of every mode.
func TestRedisOptionsEveryMode(t *testing.T) {
	ca := writeTestCA(t)
	for _, mode := range []RedisMode{RedisStandalone, RedisCluster, RedisSentinel} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RedisMode, cfg.RedisUsername, cfg.RedisPassword = mode, "app", "pw"
			cfg.RedisTLS = TLSFiles{CA: ca, ServerName: "redis.internal"}
			cfg.RedisAddrs = []string{"10.0.0.1:6379"}
			if mode == RedisSentinel {
				cfg.RedisAddrs, cfg.RedisSentinels, cfg.RedisMaster = nil, []string{"10.0.0.9:26379"}, "mymaster"
				cfg.RedisSentinelUsername, cfg.RedisSentinelPassword = "sentinel-user", "sentinel-pw"
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			m := NewMain(cfg, slog.New(slog.DiscardHandler))
			opts, err := m.redisOptions()
			if err != nil {
				t.Fatal(err)
			}
			type got struct {
				addr, user, server string
				roots              bool
			}
			var g got
			switch mode {
			case RedisStandalone:
				o := opts.Simple()
				g = got{o.Addr, o.Username, o.TLSConfig.ServerName, o.TLSConfig.RootCAs != nil}
			case RedisCluster:
				o := opts.Cluster()
				g = got{o.Addrs[0], o.Username, o.TLSConfig.ServerName, o.TLSConfig.RootCAs != nil}
			case RedisSentinel:
				o := opts.Failover()
				g = got{o.SentinelAddrs[0], o.Username, o.TLSConfig.ServerName, o.TLSConfig.RootCAs != nil}
				if o.MasterName != "mymaster" || o.SentinelUsername != "sentinel-user" || o.SentinelPassword != "sentinel-pw" {
					t.Errorf("got master %q sentinel user %q password %q, want mymaster, sentinel-user, sentinel-pw", o.MasterName, o.SentinelUsername, o.SentinelPassword)
				}
			}
			want := got{"10.0.0.1:6379", "app", "redis.internal", true}
			if mode == RedisSentinel {
				want.addr = "10.0.0.9:26379"
			}
			if g != want {
				t.Errorf("got %+v, want %+v", g, want)
			}
		})
	}
}
