package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// tlsConfig returns the TLS settings of an https gateway: the CAs of
// CAFile (the system's when empty), the client certificate of
// CertFile/KeyFile when set, and ServerName when set (else the dialled
// host's name, set per connection). Errors name the field.
func tlsConfig(c Config) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: CAFile: %w", c.Code, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gateway %s: CAFile %s holds no PEM certificate", c.Code, c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: CertFile/KeyFile: %w", c.Code, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
