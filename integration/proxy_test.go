package integration

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a loopback TCP proxy a test can cut, to make a shared server
// (MariaDB, Redis) unreachable for one payserver without stopping it for
// everyone else.
type proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	// cutOn, when set, makes a connection whose client sends bytes
	// containing it die before they are forwarded.
	cutOn []byte
	// delay holds every chunk this long before it is forwarded, either
	// way: a slow network or a slow server.
	delay time.Duration
	// cutReplies cuts a connection as soon as the target answers: the
	// request arrived, its answer never does.
	cutReplies bool
	// cutArrays cuts a connection as soon as the target answers with a
	// RESP array (a Redis script's answer), letting through the
	// connection's handshake (a RESP3 map, +OK): a script that ran whose
	// answer is lost, on old and new connections alike.
	cutArrays bool
}

// Slow holds every chunk d before forwarding it; 0 stops it.
func (p *proxy) Slow(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// CutReplies makes every connection die when the target starts to answer
// (requests still arrive); false stops it.
func (p *proxy) CutReplies(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutReplies = on
}

// CutArrays makes every connection die when Redis answers it with an
// array (a script's answer) after running the request; false stops it.
func (p *proxy) CutArrays(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutArrays = on
}

// CutOn makes every connection whose client sends bytes containing pattern
// die before they reach the target; nil stops it.
func (p *proxy) CutOn(pattern []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOn = pattern
}

// pipe copies src to dst until either side ends: the client's bytes to the
// target (toTarget), dying when they contain p.cutOn, or the target's back,
// dying when replies are cut; either way held by the delay in force.
func (p *proxy) pipe(dst, src net.Conn, toTarget bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			cut := toTarget && p.cutOn != nil && bytes.Contains(buf[:n], p.cutOn) || !toTarget && (p.cutReplies || p.cutArrays && buf[0] == '*')
			p.mu.Unlock()
			if cut {
				return
			}
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	p := &proxy{t: t, target: target, addr: freePort(t), conns: map[net.Conn]bool{}}
	p.Up()
	t.Cleanup(p.Down)
	return p
}

// Up starts accepting connections again.
func (p *proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", p.addr, err)
	}
	p.ln = ln
	go p.accept(ln)
}

// Down closes the listener and every open connection: the target looks dead.
func (p *proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go p.pipe(up, c, true)
		go p.pipe(c, up, false)
	}
}
