package testutil

import (
	"net"
	"strconv"
	"testing"

	"payserver/internal/testenv"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") that nothing
// listens on when it returns: a port for a server the test starts, or a
// dependency that refuses every connection. The port lies below the
// kernel's ephemeral range (testenv.FreePort), so no outgoing connection
// or listener on port 0 takes it before the server binds it.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort(testenv.Host, strconv.Itoa(testenv.FreePort(tb)))
}
