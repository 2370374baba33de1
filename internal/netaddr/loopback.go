// Package netaddr holds the one definition of a loopback address used by
// payserver: for admin routes without a token (the client's address), for
// the pprof listener (the configured address) and for the benchmarks.
package netaddr

import (
	"net"
	"strings"
)

// IsLoopback reports whether addr, a "host:port" or a bare IP, names a
// loopback IP (127.0.0.0/8 or ::1). Host names, "localhost" included, are
// not resolved and are not loopback: a name can resolve elsewhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackName reports whether hostport, a request's Host ("name",
// "name:port", "[v6]:port"), names this machine's loopback interface:
// "localhost" or a loopback IP. It tells a request addressed to this
// machine by its loopback name from one addressed to another name that
// happens to resolve to it (DNS rebinding). Unlike IsLoopback, it judges
// what a client wrote, not where it connected from.
func IsLoopbackName(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	return strings.EqualFold(host, "localhost") || IsLoopback(host)
}
