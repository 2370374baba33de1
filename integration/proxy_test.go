package integration

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
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
}

// CutOn makes every connection whose client sends bytes containing pattern
// die before they reach the target; nil stops it.
func (p *proxy) CutOn(pattern []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOn = pattern
}

// forward copies client bytes to up until either side ends, or until the
// client sends p.cutOn.
func (p *proxy) forward(up, c net.Conn) {
	defer func() { _ = up.Close(); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cutOn != nil && bytes.Contains(buf[:n], p.cutOn)
			p.mu.Unlock()
			if cut {
				return
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
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
		go p.forward(up, c)
		go func() { _, _ = io.Copy(c, up); _ = up.Close(); _ = c.Close() }()
	}
}
