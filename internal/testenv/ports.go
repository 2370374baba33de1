package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Host is the only address servers listen on.
const Host = "127.0.0.1"

// lowestPort is the lowest port FreePort draws.
const lowestPort = 10000

// handedOut holds every port this process's FreePort has returned, so that
// two servers of one test never get the same port. It is process-wide
// because ports are.
var handedOut sync.Map

// FreePort returns a loopback port p such that nothing listens on p, nor
// on p+off for each of offsets (r-nacos serves gRPC on its HTTP port +
// 1000, which the Nacos SDKs assume), when it returns.
//
// A port freed by closing a listener on port 0 is one the kernel hands
// out again, to the next listener on port 0 or to an outgoing connection,
// before the server the test starts has bound it. FreePort draws instead
// at random below the kernel's ephemeral range, which the kernel never
// assigns by itself, and never returns one port twice in a process; only
// another process drawing the same port in the same moment can still take
// it.
func FreePort(tb TB, offsets ...int) int {
	tb.Helper()
	top := ephemeralLow()
	for _, off := range offsets {
		top = min(top, ephemeralLow()-off)
	}
	for range 1000 {
		p := lowestPort + rand.IntN(top-lowestPort)
		if !claim(p, offsets) {
			continue
		}
		if free(p) && allFree(p, offsets) {
			return p
		}
	}
	tb.Fatalf("testenv: no free loopback port p with p+%v free below %d", offsets, top)
	return 0
}

// claim records p and p+off for each of offsets as handed out, and reports
// whether none of them was already; a port it claimed stays claimed either
// way, which only narrows later draws.
func claim(p int, offsets []int) bool {
	ok := true
	for _, off := range append([]int{0}, offsets...) {
		if _, taken := handedOut.LoadOrStore(p+off, true); taken {
			ok = false
		}
	}
	return ok
}

func allFree(p int, offsets []int) bool {
	for _, off := range offsets {
		if !free(p + off) {
			return false
		}
	}
	return true
}

// free reports whether a listener can bind Host:p now.
func free(p int) bool {
	l, err := net.Listen("tcp", addr(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow is the lowest port of the kernel's ephemeral range (Linux's
// default when the range cannot be read).
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return fallback
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= lowestPort+2000 {
		return fallback
	}
	return lo
}

// addr returns Host:port.
func addr(port int) string { return net.JoinHostPort(Host, strconv.Itoa(port)) }
