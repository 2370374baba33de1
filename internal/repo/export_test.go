package repo

// SetFlushHook makes every flush of kind ("create", "finish" or "get") call
// f first, with the number of calls it serves, in the flushing goroutine.
// Set it before the store is used.
func SetFlushHook(s *Orders, kind string, f func(n int)) {
	switch kind {
	case "create":
		s.group.creates.flushHook = f
	case "finish":
		s.group.finishes.flushHook = f
	case "get":
		s.group.gets.flushHook = f
	default:
		panic("unknown kind " + kind)
	}
}

// Queued is the number of calls of kind waiting for the next flush.
func Queued(s *Orders, kind string) int {
	switch kind {
	case "create":
		return s.group.creates.queued()
	case "finish":
		return s.group.finishes.queued()
	case "get":
		return s.group.gets.queued()
	}
	panic("unknown kind " + kind)
}

func (b *batcher[A, R]) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
