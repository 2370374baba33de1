package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs are throwaway TLS files in PEM: a CA that signed a server
// certificate (for 127.0.0.1 and localhost) and a client certificate, and
// a second CA that signed nothing of ours, for tests that must see a
// verification fail. Keys are ECDSA P-256.
type Certs struct {
	Dir                   string
	CA, WrongCA           string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewCerts makes a new set of certificates under tb.TempDir().
func NewCerts(tb TB) *Certs {
	tb.Helper()
	c, err := writeCerts(tb.TempDir())
	if err != nil {
		tb.Fatalf("testenv: certificates: %v", err)
	}
	return c
}

// ClientTLS returns a client configuration that trusts the CA and presents
// the client certificate.
func (c *Certs) ClientTLS() (*tls.Config, error) {
	ca, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", c.CA)
	}
	cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// issuer is a certificate with its key, able to sign others.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func writeCerts(dir string) (*Certs, error) {
	c := &Certs{
		Dir: dir, CA: filepath.Join(dir, "ca.crt"), WrongCA: filepath.Join(dir, "wrong-ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
	}
	ca, err := issue(nil, "payserver test CA", 0, func(t *x509.Certificate) {
		t.IsCA, t.BasicConstraintsValid, t.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageCRLSign
	}, c.CA, "")
	if err != nil {
		return nil, err
	}
	if _, err := issue(nil, "some other CA", 0, func(t *x509.Certificate) {
		t.IsCA, t.BasicConstraintsValid, t.KeyUsage = true, true, x509.KeyUsageCertSign
	}, c.WrongCA, ""); err != nil {
		return nil, err
	}
	if _, err := issue(ca, "localhost", x509.ExtKeyUsageServerAuth, func(t *x509.Certificate) {
		t.IPAddresses, t.DNSNames = []net.IP{net.ParseIP(Host)}, []string{"localhost"}
	}, c.ServerCert, c.ServerKey); err != nil {
		return nil, err
	}
	if _, err := issue(ca, "payserver", x509.ExtKeyUsageClientAuth, nil, c.ClientCert, c.ClientKey); err != nil {
		return nil, err
	}
	return c, nil
}

// issue makes a key and a certificate for cn signed by parent (self-signed
// when parent is nil), lets shape adjust the template, and writes the
// certificate to certPath and, when keyPath is set, the key (PKCS #8).
func issue(parent *issuer, cn string, usage x509.ExtKeyUsage, shape func(*x509.Certificate), certPath, keyPath string) (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if usage != 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	if shape != nil {
		shape(tmpl)
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	if keyPath != "" {
		k, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), 0o600); err != nil {
			return nil, err
		}
	}
	return &issuer{cert: cert, key: key}, nil
}
