package emulator

import (
	"fmt"
	"net"

	"payserver/internal/netaddr"
)

// ListenLoopback listens on addr, a host:port whose host is a loopback IP
// (127.0.0.0/8, ::1) or "localhost", and refuses any other: the emulator
// is a test tool, never reachable from another machine. Port 0 picks a
// free port (see the listener's Addr).
func ListenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: address %q: %w", addr, err)
	}
	if host != "localhost" && !netaddr.IsLoopback(host) {
		return nil, fmt.Errorf("emulator: address %q is not a loopback address (use 127.0.0.1, [::1] or localhost): the emulator is a test tool and serves this machine only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: listen: %w", err)
	}
	if !netaddr.IsLoopback(ln.Addr().String()) {
		_ = ln.Close()
		return nil, fmt.Errorf("emulator: %q is bound to %s, which is not loopback", addr, ln.Addr())
	}
	return ln, nil
}
