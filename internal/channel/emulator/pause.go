package emulator

import (
	"sync"
	"time"
)

// pause holds a channel's calls until a time: a call arriving during a
// pause waits for its end, then is handled. The zero value is not paused.
type pause struct {
	mu      sync.Mutex
	until   time.Time
	changed chan struct{} // closed (and replaced) when until changes
}

// set pauses until t; a t in the past ends the pause and releases the
// waiting calls.
func (p *pause) set(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until = t
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// left is how long the pause still lasts at now (0 when not paused).
func (p *pause) left(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.until.Sub(now), 0)
}

// wait returns true when the channel is not paused, after waiting for the
// pause to end, or false when stop closed first.
func (p *pause) wait(stop <-chan struct{}) bool {
	for {
		p.mu.Lock()
		d := time.Until(p.until)
		if d <= 0 {
			p.mu.Unlock()
			return true
		}
		if p.changed == nil {
			p.changed = make(chan struct{})
		}
		changed := p.changed
		p.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		case <-stop:
			t.Stop()
			return false
		}
	}
}
