package repo

// SetFlushHook makes every flush of kind ("create", "finish" or "get") call
// f first, with the number of calls it serves, in the flushing goroutine.
// Set it before the store is used.
func SetFlushHook(s *Orders, kind string, f func(n int)) {
	switch kind {
	case "create":
		s.group.creates.FlushHook = f
	case "finish":
		s.group.finishes.FlushHook = f
	case "get":
		s.group.gets.FlushHook = f
	default:
		panic("unknown kind " + kind)
	}
}

// Queued is the number of calls of kind waiting for the next flush.
func Queued(s *Orders, kind string) int {
	switch kind {
	case "create":
		return s.group.creates.Queued()
	case "finish":
		return s.group.finishes.Queued()
	case "get":
		return s.group.gets.Queued()
	}
	panic("unknown kind " + kind)
}

// FinishSQL is the batched outcome UPDATE for n outcomes on dialect, as the
// store sends it, or, with table set, on that table reference instead.
func FinishSQL(dialect string, n int, table string) string {
	if table == "" {
		table = finishTable(dialect)
	}
	return finishSQL(table, n)
}

// StaleBatch bounds the orders one sweep statement turns UNKNOWN.
const StaleBatch = staleBatch

// MarkStaleSQL is the sweep's UPDATE of n orders by primary key on dialect.
func MarkStaleSQL(dialect string, n int) string { return markStaleSQL(dialect, n) }

// SetBucketPage makes EachBucket read n buckets per query, so that tests
// page through a few thousand.
func SetBucketPage(s *ChannelStats, n int) { s.page = n }
