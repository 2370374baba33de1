package gateway

import (
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// ErrNonceCacheFull is a message that was not checked for replay because
// the receiver's NonceCache is full of nonces still inside the window. The
// message is refused without being processed (the receiver answers 503),
// so its sender tries again later; it is not a *RefusedError, since
// nothing is wrong with the message.
var ErrNonceCacheFull = errors.New("gateway: the nonce cache is full; try again later")

// DefaultNonceCacheSize is the NonceCache size of a zero size: at about
// 150 bytes a nonce, 15 MB, room for 166 messages a second held for the
// whole window (2×MaxSkew).
const DefaultNonceCacheSize = 100_000

// NonceCache remembers the nonces of accepted messages for 2×MaxSkew from
// their arrival, the longest a message can stay within MaxSkew of the
// receiver's clock: a nonce seen again in that time is a replay. It holds
// at most its size; when full of nonces still inside the window it
// refuses new messages (ErrNonceCacheFull) rather than forget one early.
// It is safe for concurrent use.
type NonceCache struct {
	size int

	mu    sync.Mutex
	seen  map[[sha256.Size]byte]struct{}
	queue []nonceEntry // by arrival; the first expires first
	head  int
}

type nonceEntry struct {
	key     [sha256.Size]byte
	expires time.Time
}

// NewNonceCache returns a cache of at most size nonces;
// DefaultNonceCacheSize when size is 0 or less.
func NewNonceCache(size int) *NonceCache {
	if size <= 0 {
		size = DefaultNonceCacheSize
	}
	return &NonceCache{size: size, seen: map[[sha256.Size]byte]struct{}{}}
}

// Size returns the most nonces the cache holds.
func (c *NonceCache) Size() int { return c.size }

// Add records the nonce of a message on channel, arrived at now. A nonce
// already recorded on channel (under whichever key) is a *RefusedError
// (ReasonReplayed); a full cache is ErrNonceCacheFull. Call it only for a
// message Verify accepted, so that forged ones cannot fill the cache.
func (c *NonceCache) Add(channel, nonce string, now time.Time) error {
	h := sha256.New()
	for _, s := range []string{channel, nonce} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	if _, dup := c.seen[k]; dup {
		return refused(ReasonReplayed, "nonce %s was seen within the last %v", truncate(nonce, 64), 2*MaxSkew)
	}
	if len(c.seen) >= c.size {
		return ErrNonceCacheFull
	}
	c.seen[k] = struct{}{}
	c.queue = append(c.queue, nonceEntry{key: k, expires: now.Add(2 * MaxSkew)})
	return nil
}

// Len returns the nonces held.
func (c *NonceCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// expire drops the nonces whose time is over; c.mu is held.
func (c *NonceCache) expire(now time.Time) {
	for c.head < len(c.queue) && !now.Before(c.queue[c.head].expires) {
		delete(c.seen, c.queue[c.head].key)
		c.queue[c.head] = nonceEntry{}
		c.head++
	}
	if c.head > 0 && c.head*2 >= len(c.queue) {
		c.queue = append(c.queue[:0], c.queue[c.head:]...)
		c.head = 0
	}
}
