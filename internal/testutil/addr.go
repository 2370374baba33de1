package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") that nothing
// listens on when it returns: a port for a server the test starts, or a
// dependency that refuses every connection.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
