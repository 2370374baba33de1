package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// BenchmarkAcquireVsPay measures the cost of one POST /v1/limits/acquire
// against one POST /pay, side by side in one run, on one payserver (built
// without the race detector) on the real Redis and MariaDB of
// internal/testenv (TestMain): the same key (limit 10,000,000 per 1s, so every
// request is checked on Redis and admitted), zero-latency simulator
// channel, a requestId of its own per request, BENCH_LIMITS_CONCURRENCY
// concurrent callers (default 16) over keep-alive connections. Pay and
// acquire alternate in rounds of 200 requests so that drift on the shared
// machine hits both alike. It reports µs per request for each and the
// ratio pay/acquire.
//
//	go test -run '^$' -bench AcquireVsPay -benchtime 4000x ./integration/
func BenchmarkAcquireVsPay(b *testing.B) {
	workers := 16
	if n := envInt("BENCH_LIMITS_CONCURRENCY"); n > 0 {
		workers = n
	}
	biz := testutil.UniqueName("COST")
	s := startServer(b, serverOptions{Fast: true, Env: limitsEnv(map[string]string{"PAYSERVER_LOG_LEVEL": "warn"}),
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 10000000, window: 1s}\n", biz)})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	var seq atomic.Int64
	post := func(path string, body map[string]any, header http.Header) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("%s answered %d", path, resp.StatusCode)
		}
	}
	pay := func() { post("/pay", payBody(fmt.Sprintf("bp-%d", seq.Add(1)), biz, "ALIPAY"), nil) }
	acquire := func() {
		post("/v1/limits/acquire", slot(biz, "ALIPAY", fmt.Sprintf("ba-%d", seq.Add(1))), bearer(refundsToken))
	}
	// Warm connections, scripts and pools.
	parallel(200, workers, func(int) { pay(); acquire() })

	const round = 200
	var payTime, acquireTime time.Duration
	done := 0
	b.ResetTimer()
	for done < b.N {
		n := min(round, b.N-done)
		start := time.Now()
		parallel(n, workers, func(int) { pay() })
		payTime += time.Since(start)
		start = time.Now()
		parallel(n, workers, func(int) { acquire() })
		acquireTime += time.Since(start)
		done += n
	}
	b.StopTimer()
	payUs := float64(payTime.Microseconds()) / float64(b.N)
	acqUs := float64(acquireTime.Microseconds()) / float64(b.N)
	b.ReportMetric(payUs, "pay-µs/req")
	b.ReportMetric(acqUs, "acquire-µs/req")
	b.ReportMetric(payUs/acqUs, "pay/acquire")
	b.Logf("RATIO one POST /pay costs %.2fx one acquire: pay %.0f µs/req (%.0f req/s), acquire %.0f µs/req (%.0f req/s), %d each, %d concurrent callers",
		payUs/acqUs, payUs, float64(b.N)/payTime.Seconds(), acqUs, float64(b.N)/acquireTime.Seconds(), b.N, workers)
}
