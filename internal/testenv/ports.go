package testenv

import (
	"net"
	"strconv"
)

// Host is the only address servers listen on.
const Host = "127.0.0.1"

// FreePort returns a loopback port p such that nothing listens on p, nor
// on p+off for each of offsets (r-nacos serves gRPC on its HTTP port +
// 1000, which the Nacos SDKs assume), when it returns.
func FreePort(tb TB, offsets ...int) int {
	tb.Helper()
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
		if err != nil {
			tb.Fatalf("testenv: %v", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		held := []net.Listener{l}
		ok := true
		for _, off := range offsets {
			if p+off > 65535 {
				ok = false
				break
			}
			l2, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(p+off)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l2)
		}
		for _, h := range held {
			_ = h.Close()
		}
		if ok {
			return p
		}
	}
	tb.Fatalf("testenv: no free loopback port p with p+%v free", offsets)
	return 0
}

// addr returns Host:port.
func addr(port int) string { return net.JoinHostPort(Host, strconv.Itoa(port)) }
