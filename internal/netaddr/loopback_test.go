package netaddr

import "testing"

// The table covers client addresses (admin routes without a token) and
// configured listen addresses (pprof).
func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5555":        true,
		"127.8.9.10:1":          true,
		"[::1]:8080":            true,
		"[::ffff:127.0.0.1]:80": true, // IPv4-mapped loopback
		"127.0.0.1":             true, // no port
		"10.0.0.7:1234":         false,
		"192.168.1.20:80":       false,
		"172.16.0.1:80":         false,
		"8.8.8.8:53":            false,
		"0.0.0.0:80":            false,
		"[::]:80":               false,
		"[2001:db8::1]:443":     false,
		"[fe80::1%eth0]:80":     false, // zoned: not parsed as an IP, so refused
		"[::ffff:10.0.0.7]:80":  false,
		"localhost:80":          false, // RemoteAddr is always an IP; a name is refused
		"":                      false,
		"garbage":               false,
		"127.0.0.1.evil.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
