package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/internal/channel"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(tb testing.TB, name string) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for name (also valid for 127.0.0.1) signed
// by ca, for usage, and its PEM certificate and key.
func (ca *testCA) issue(tb testing.TB, name string, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{name}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// writeFile writes data to name in a temporary folder and returns its path.
func writeFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// newTLSGateway starts a test gateway on https with a certificate for
// "gateway.test" signed by ca; with clientCA set it requires a client
// certificate signed by it.
func newTLSGateway(tb testing.TB, ca, clientCA *testCA) *testGateway {
	tb.Helper()
	cert, _, _ := ca.issue(tb, "gateway.test", x509.ExtKeyUsageServerAuth)
	g := newUnstartedGateway(tb, answer(Answer{Outcome: Succeeded, TradeNo: "T-TLS"}))
	g.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		g.srv.TLS.ClientAuth, g.srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	g.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	g.srv.StartTLS()
	return g
}

// TestTLS: an https gateway is reached when its certificate is signed by
// CAFile's CA for the expected name; a handshake that fails (another CA,
// another name) is ErrNotSent.
func TestTLS(t *testing.T) {
	ca, other := newTestCA(t, "gateway CA"), newTestCA(t, "another CA")
	g := newTLSGateway(t, ca, nil)
	caFile, otherFile := writeFile(t, "ca.pem", ca.pem), writeFile(t, "other.pem", other.pem)
	port := g.srv.URL[strings.LastIndex(g.srv.URL, ":")+1:]
	cases := []struct {
		name, baseURL, caFile, serverName string
		want                              class
	}{
		{name: "trusted, by IP", baseURL: g.srv.URL, caFile: caFile, want: answered},
		{name: "trusted, by ServerName", baseURL: g.srv.URL, caFile: caFile, serverName: "gateway.test", want: answered},
		{name: "trusted, by host name", baseURL: "https://localhost:" + port, caFile: caFile, serverName: "gateway.test", want: answered},
		{name: "another CA", baseURL: g.srv.URL, caFile: otherFile, want: notSent},
		{name: "system roots only", baseURL: g.srv.URL, want: notSent},
		{name: "another name", baseURL: g.srv.URL, caFile: caFile, serverName: "other.test", want: notSent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(g.requests())
			cfg := testConfig(tc.baseURL)
			cfg.CAFile, cfg.ServerName = tc.caFile, tc.serverName
			ch := mustChannel(t, cfg, nil)
			res, err := ch.Pay(context.Background(), testOrder)
			if got := classOf(err); got != tc.want {
				t.Fatalf("class %s (err %v), want %s", got, err, tc.want)
			}
			if tc.want == answered && res.TradeNo != "T-TLS" {
				t.Errorf("result %+v", res)
			}
			var de *dialError
			if tc.want == notSent && (!errors.As(err, &de) || de.stage != "TLS handshake") {
				t.Errorf("err %v, want a TLS handshake error", err)
			}
			if got, want := len(g.requests())-before, map[bool]int{true: 1}[tc.want == answered]; got != want {
				t.Errorf("the gateway got %d requests, want %d", got, want)
			}
		})
	}
}

// TestMutualTLS: a gateway that requires a client certificate gets the
// configured one. Without it (or with one it does not trust) the call
// fails and the gateway processes nothing; under TLS 1.3 the client only
// learns of the refusal after its request was written, so it cannot prove
// that and does not claim ErrNotSent.
func TestMutualTLS(t *testing.T) {
	ca, clientCA, stranger := newTestCA(t, "gateway CA"), newTestCA(t, "payserver CA"), newTestCA(t, "stranger CA")
	g := newTLSGateway(t, ca, clientCA)
	_, certPEM, keyPEM := clientCA.issue(t, "payserver", x509.ExtKeyUsageClientAuth)
	_, strangerCert, strangerKey := stranger.issue(t, "payserver", x509.ExtKeyUsageClientAuth)
	caFile := writeFile(t, "ca.pem", ca.pem)

	cfg := testConfig(g.srv.URL)
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = caFile, writeFile(t, "client.pem", certPEM), writeFile(t, "client.key", keyPEM)
	res, err := mustChannel(t, cfg, nil).Pay(context.Background(), testOrder)
	if err != nil || res.Status != channel.Succeeded {
		t.Fatalf("with the client certificate: %+v, %v", res, err)
	}
	if got := g.requests(); len(got) != 1 || got[0].PeerCN != "payserver" {
		t.Fatalf("the gateway got %+v, want one request from payserver", got)
	}

	for name, files := range map[string][2]string{
		"no client certificate": {},
		"an untrusted one":      {writeFile(t, "s.pem", strangerCert), writeFile(t, "s.key", strangerKey)},
	} {
		cfg.CertFile, cfg.KeyFile = files[0], files[1]
		_, err := mustChannel(t, cfg, nil).Pay(context.Background(), testOrder)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		t.Logf("%s: %s: %v", name, classOf(err), err)
	}
	if n := len(g.requests()); n != 1 {
		t.Errorf("the gateway got %d requests, want only the one with the trusted certificate", n)
	}
}

// TestTLSHandshakeTimeout: a gateway that accepts the connection but never
// completes the handshake (a real silent listener) is ErrNotSent after
// ConnectTimeout, well within CallTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	cfg := testConfig("https://" + l.Addr().String())
	cfg.ConnectTimeout, cfg.CallTimeout = 100*time.Millisecond, 5*time.Second
	start := time.Now()
	_, err = mustChannel(t, cfg, nil).Pay(context.Background(), testOrder)
	var de *dialError
	if classOf(err) != notSent || !errors.As(err, &de) || de.stage != "TLS handshake" {
		t.Errorf("err %v, want ErrNotSent from the TLS handshake", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v, want about ConnectTimeout", d)
	}
}
