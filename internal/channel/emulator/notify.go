package emulator

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"payserver/internal/channel/gateway"
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// URL is payserver's base URL; a notification goes to
	// URL + gateway.PathNotify with the channel's code.
	URL string
	// Key returns the key that signs a channel's notifications; false
	// drops them.
	Key func(channel string) (gateway.Key, bool)
	// Client sends the notifications; nil is a client with a 3 s timeout.
	Client *http.Client
	Logger *slog.Logger
	// QueueLimit bounds the notifications waiting (copies and retries
	// included); a notification past it is dropped and logged. 0 is 10000.
	QueueLimit int
	// Attempts is how many times one copy is sent before giving up; 0 is 5.
	Attempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each next one; 0 is 200 ms.
	Backoff time.Duration
}

// NotifyOptions shape one notification: its copies and their timing.
type NotifyOptions struct {
	// Due is when the outcome was revealed: the notification is sent Delay
	// after it (after now when Due is earlier).
	Due        time.Time
	Delay      time.Duration
	Duplicates int
	Reorder    bool
	// Retries is the wait before each retry of a copy not acknowledged,
	// in order; nil uses the Notifier's Attempts and Backoff.
	Retries []time.Duration
}

// NotifierStats counts a Notifier's copies.
type NotifierStats struct {
	Delivered int64 // answered 2xx
	Failed    int64 // given up after the attempts, or refused (400, 401, 403)
	Dropped   int64 // over the queue limit, or left at Close
}

// Notifier sends signed notifications (gateway.Answer) to payserver in the
// background: one sender, a bounded queue ordered by due time, a few
// attempts per copy with exponential backoff. Close stops it.
type Notifier struct {
	base     string
	key      func(string) (gateway.Key, bool)
	client   *http.Client
	log      *slog.Logger
	limit    int
	attempts int
	backoff  time.Duration
	rand     *roller

	mu    sync.Mutex
	queue jobQueue
	seq   uint64

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	delivered, failed, dropped atomic.Int64
}

// job is one copy of one notification.
type job struct {
	channel string
	answer  gateway.Answer
	due     time.Time
	tries   int
	retries []time.Duration // nil: the Notifier's attempts and backoff
	seq     uint64          // keeps copies due at once in the order they were queued
}

// NewNotifier checks cfg and starts the sender.
func NewNotifier(cfg NotifierConfig, rand *roller) (*Notifier, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("emulator: notify URL %q is not an http(s) URL", cfg.URL)
	}
	if cfg.Key == nil {
		return nil, errors.New("emulator: notifier without keys")
	}
	if rand == nil {
		return nil, errors.New("emulator: notifier without a random source")
	}
	n := &Notifier{
		base:     strings.TrimRight(cfg.URL, "/"),
		key:      cfg.Key,
		client:   cfg.Client,
		log:      cfg.Logger,
		limit:    cfg.QueueLimit,
		attempts: cfg.Attempts,
		backoff:  cfg.Backoff,
		rand:     rand,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if n.client == nil {
		n.client = &http.Client{Timeout: 3 * time.Second}
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.limit <= 0 {
		n.limit = 10000
	}
	if n.attempts <= 0 {
		n.attempts = 5
	}
	if n.backoff <= 0 {
		n.backoff = 200 * time.Millisecond
	}
	go n.run()
	return n, nil
}

// Send queues a notification of a on channel, and its duplicates; after
// Close it drops them.
func (n *Notifier) Send(channel string, a gateway.Answer, opts NotifyOptions) {
	select {
	case <-n.stop:
		n.dropped.Add(int64(1 + opts.Duplicates))
		return
	default:
	}
	due := opts.Due
	if now := time.Now(); due.Before(now) {
		due = now
	}
	n.mu.Lock()
	for range 1 + opts.Duplicates {
		if len(n.queue) >= n.limit {
			n.dropped.Add(1)
			n.log.Warn("notification dropped: queue full", "channel", channel, "orderNo", a.OrderNo, "limit", n.limit)
			continue
		}
		wait := opts.Delay
		if opts.Reorder {
			spread := 2 * opts.Delay
			if spread == 0 {
				spread = reorderSpread
			}
			wait = Latency{Max: spread}.draw(n.rand.float())
		}
		n.seq++
		heap.Push(&n.queue, &job{channel: channel, answer: a, due: due.Add(wait), retries: opts.Retries, seq: n.seq})
	}
	n.mu.Unlock()
	n.poke()
}

func (n *Notifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counts so far.
func (n *Notifier) Stats() NotifierStats {
	return NotifierStats{Delivered: n.delivered.Load(), Failed: n.failed.Load(), Dropped: n.dropped.Load()}
}

// Close stops the sender (an attempt in flight is cancelled) and drops
// what is still queued.
func (n *Notifier) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		<-n.done
		n.mu.Lock()
		left := len(n.queue)
		n.queue = nil
		n.mu.Unlock()
		n.dropped.Add(int64(left))
		if left > 0 {
			n.log.Warn("notifications left unsent at shutdown", "count", left)
		}
	})
	return nil
}

func (n *Notifier) run() {
	defer close(n.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-n.done:
		}
	}()
	for {
		next, wait := n.next(time.Now())
		if next != nil {
			n.deliver(ctx, next)
			continue
		}
		if !n.sleep(wait) {
			return
		}
	}
}

// sleep waits for wait (forever when 0), a new copy or Close; false
// means Close.
func (n *Notifier) sleep(wait time.Duration) bool {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-n.stop:
		return false
	case <-n.wake:
	case <-timer:
	}
	return true
}

// next pops the first copy due at now, or says how long until one is (0
// when none is queued).
func (n *Notifier) next(now time.Time) (*job, time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) == 0 {
		return nil, 0
	}
	if first := n.queue[0]; first.due.After(now) {
		return nil, first.due.Sub(now)
	}
	return heap.Pop(&n.queue).(*job), 0
}

func (n *Notifier) deliver(ctx context.Context, j *job) {
	j.tries++
	status, err := n.post(ctx, j)
	switch {
	case err == nil && status/100 == 2:
		n.delivered.Add(1)
		n.log.Debug("notification delivered", "channel", j.channel, "orderNo", j.answer.OrderNo, "outcome", j.answer.Outcome, "status", status)
		return
	case ctx.Err() != nil:
		n.dropped.Add(1) // stopping: cut off in flight
		return
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden:
		n.failed.Add(1)
		n.log.Warn("notification refused", "channel", j.channel, "orderNo", j.answer.OrderNo, "status", status)
		return
	case j.retries == nil && j.tries >= n.attempts, j.retries != nil && j.tries > len(j.retries):
		n.failed.Add(1)
		n.log.Warn("notification given up", "channel", j.channel, "orderNo", j.answer.OrderNo, "tries", j.tries, "status", status, "err", err)
		return
	}
	n.log.Debug("notification failed; will retry", "channel", j.channel, "orderNo", j.answer.OrderNo, "tries", j.tries, "status", status, "err", err)
	wait := n.backoff << (j.tries - 1)
	if j.retries != nil {
		wait = j.retries[j.tries-1]
	}
	j.due = time.Now().Add(wait)
	n.mu.Lock()
	heap.Push(&n.queue, j)
	n.mu.Unlock()
}

// post sends one copy, signed, and returns payserver's status.
func (n *Notifier) post(ctx context.Context, j *job) (int, error) {
	body, err := json.Marshal(j.answer)
	if err != nil {
		return 0, err
	}
	target := n.base + strings.Replace(gateway.PathNotify, "{code}", url.PathEscape(j.channel), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	key, ok := n.key(j.channel)
	if !ok {
		return 0, fmt.Errorf("no key for channel %s", j.channel)
	}
	gateway.Sign(req.Header, key, gateway.Message{Method: req.Method, Path: req.URL.EscapedPath(), Body: body}, time.Now())
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drain, to reuse the connection
	return resp.StatusCode, nil
}

// jobQueue is a heap of copies by due time, then queue order.
type jobQueue []*job

func (q jobQueue) Len() int { return len(q) }
func (q jobQueue) Less(i, k int) bool {
	if !q[i].due.Equal(q[k].due) {
		return q[i].due.Before(q[k].due)
	}
	return q[i].seq < q[k].seq
}
func (q jobQueue) Swap(i, k int) { q[i], q[k] = q[k], q[i] }
func (q *jobQueue) Push(x any)   { *q = append(*q, x.(*job)) }
func (q *jobQueue) Pop() any {
	old := *q
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return j
}
