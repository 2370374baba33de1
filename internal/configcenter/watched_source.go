package configcenter

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"sync/atomic"
)

// WatchedSource is a Source that remembers the MD5 of the latest document
// its inner source delivered, so that the service can tell whether that
// document is the one in force (Status.MD5) or was refused and the last
// good one stays (the "limits document refused" alert).
type WatchedSource struct {
	Source
	last atomic.Pointer[string]
	done chan struct{}
}

// Watch wraps src.
func Watch(src Source) *WatchedSource { return &WatchedSource{Source: src, done: make(chan struct{})} }

// Done is closed when Run returned (the inner source has shut down). Run
// must be called once.
func (w *WatchedSource) Done() <-chan struct{} { return w.done }

// Run runs the inner source; each document is recorded once sink returned.
func (w *WatchedSource) Run(ctx context.Context, sink func(Document)) error {
	defer close(w.done)
	return w.Source.Run(ctx, func(d Document) {
		sink(d)
		m := d.MD5
		if m == "" {
			sum := md5.Sum(d.Content)
			m = hex.EncodeToString(sum[:])
		}
		w.last.Store(&m)
	})
}

// LastMD5 returns the MD5 of the latest delivered document, or "" before
// the first.
func (w *WatchedSource) LastMD5() string {
	if p := w.last.Load(); p != nil {
		return *p
	}
	return ""
}
