package pay

import "sync"

// startWorkers starts n copies of work and returns a wait for all of them
// to return: the one place internal/pay starts goroutines. Its callers are
// the Ledger's and the Resolver's Run, both started and stopped by Main.
func startWorkers(n int, work func()) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	return wg.Wait
}
