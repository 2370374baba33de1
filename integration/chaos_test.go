package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"payserver/integration/chaos/witness"
	"payserver/internal/testenv"
)

// The chaos campaign: a seeded run of three payserver instances on real
// MariaDB, Redis and the channel emulator, clients drawing payments and
// limit-API calls while a nemesis kills, pauses and restarts instances,
// cuts and slows Redis, MariaDB and the emulator through proxies, makes the
// channels misbehave and changes the limits document. The history is then
// checked by the witness (integration/chaos/witness), which shares no code
// with payserver. docs/RELIABILITY.md, "The chaos campaign", says how to
// read a failure.
//
//	CHAOS_SEED       the seed (default: the clock); the same seed replays
//	                 the same schedule of operations and faults
//	CHAOS_DURATION   how long the load and the faults last (default 40s;
//	                 make chaos: 10m)
//	CHAOS_HISTORY    a file to write the history to (default: kept under
//	                 the test's temp dir, copied to /tmp when it fails)
//	CHAOS_POLICY     the limiter policy, local or deny (default: drawn
//	                 from the seed, deny one campaign in three)

// chaosRun is one campaign's settings.
type chaosRun struct {
	seed     uint64
	duration time.Duration
}

// chaosPolicy draws the campaign's limiter policy from a generator of its
// own (the seed's stream 4), so that the other draws of a seed do not
// shift: deny (no admission without Redis, so no excess at all) one
// campaign in three, local otherwise. CHAOS_POLICY sets it.
func chaosPolicy(seed uint64) string {
	draw := rand.New(rand.NewPCG(seed, 4)).IntN(3)
	switch v := os.Getenv("CHAOS_POLICY"); v {
	case "local", "deny":
		return v
	}
	if draw == 0 {
		return "deny"
	}
	return "local"
}

func chaosSettings(t *testing.T) chaosRun {
	r := chaosRun{seed: uint64(time.Now().UnixNano()), duration: 40 * time.Second}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
		r.seed = v
	}
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a Go duration such as 90s", s)
		}
		r.duration = d
	}
	return r
}

// campaign is the system under test and what the runner records of it.
type campaign struct {
	t        *testing.T
	run      chaosRun
	tag      string
	chA, chB string // the channels, unique to the run
	pay, rf  string // bizTypes: payments (pinned and routed), limit-API calls
	dup      string // bizType of duplicates pinned to both channels, with room on both
	// Keys of one shape each on chB, driven past their limits by bursts
	// with duplicates and retries at other amounts: plain (one sliding
	// count window, no learning: the plain script) for 1 s and for 5 min
	// (still live at the dump), and calendar only.
	plain, plainLong, cal string
	policy                string // the limiter policy, chaosPolicy
	token                 string // the limit-API client token
	admin                 string // the admin token

	limitsPath string
	// nacos, when set, is the r-nacos the limits are published to (dataId
	// nacosID) instead of the watched file: drawn per campaign.
	nacos, nacosID string
	emu            *emulator
	db             *sql.DB
	rdb            *redis.Client
	instances      []*chaosInstance
	// The campaign's own Redis and durable MariaDB (internal/testenv), so
	// that the nemesis can kill and restart them. The Redis topology is
	// drawn per campaign (CHAOS_REDIS sets it): standalone (redisSrv,
	// behind a proxy per instance), Sentinel (sentinel: a master, its
	// replica, three sentinels) or Cluster (cluster: three masters, a
	// replica each); rdb reads the windows at the end.
	topology string
	redisSrv *testenv.Redis
	sentinel *testenv.Sentinel
	cluster  *testenv.Cluster
	rcl      *redis.ClusterClient
	mariadb  *testenv.MariaDB

	seq     atomic.Int64
	mu      sync.Mutex
	ops     []witness.Op
	faults  []witness.Fault
	limits  []witness.LimitsDoc
	acquire []acquired // acquired through the limits API, for releases
}

// chaosInstance is one payserver process and the proxies in front of its
// dependencies.
type chaosInstance struct {
	name          string
	srv           *server
	redis, db, gw *proxy
	mu            sync.Mutex
	down          bool // killed, not yet restarted
}

// chaosLostAnswerGrace is the instances' PAYSERVER_LOST_ANSWER_GRACE: short
// enough to wait out before the run's end is read, long enough for any
// check a fault held (a stopped instance, a slow proxy) to have reached
// Redis.
const chaosLostAnswerGrace = 10 * time.Second

// TestChaosCampaign runs one campaign and checks its history.
func TestChaosCampaign(t *testing.T) {
	run := chaosSettings(t)
	fmt.Printf("chaos: seed %d, duration %s (replay: CHAOS_SEED=%d CHAOS_DURATION=%s make chaos)\n", run.seed, run.duration, run.seed, run.duration)
	c := newCampaign(t, run, rand.New(rand.NewPCG(run.seed, 1)))
	source := "the watched file"
	if c.nacos != "" {
		source = "r-nacos " + c.nacosID
	}
	fmt.Printf("chaos: channels %s and %s, limits from %s, Redis %s, policy %s\n", c.chA, c.chB, source, c.topology, c.policy)
	ctx, stop := context.WithTimeout(context.Background(), run.duration)
	defer stop()
	var wg sync.WaitGroup
	const clients = 6
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.client(ctx, i, rand.New(rand.NewPCG(run.seed, uint64(100+i))))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.nemesis(ctx, rand.New(rand.NewPCG(run.seed, 2)))
	}()
	wg.Wait()
	quietFrom := time.Now().UnixMicro()
	c.heal()
	// Past the lost-answer grace, and the ledger's longest wait between
	// two tries, every slot a 503 kept must be settled: the witness then
	// excuses none of them. Counted from the end of the healing: a
	// stopped instance's lost answers start their grace when it resumes,
	// and releases wait for Redis to be reachable again.
	settled := time.Now().Add(chaosLostAnswerGrace + 6*time.Second)
	c.awaitQuiet(90 * time.Second)
	// An order that became final just now frees the slots the ledger
	// watches on it at its next look, within its longest wait.
	if next := time.Now().Add(6 * time.Second); next.After(settled) {
		settled = next
	}
	time.Sleep(time.Until(settled))
	h := c.collect(quietFrom)
	path := c.writeHistory(h)
	rep := witness.Check(h, witness.Options{LostAnswerGrace: chaosLostAnswerGrace})
	fmt.Printf("chaos: seed %d: %s\n", run.seed, rep.Summary())
	fmt.Printf("chaos: limiter checks by path (refused): %s\n", pathSummary(rep.Paths))
	fmt.Printf("chaos: admissions held to a merchant's own limit: %d\n", rep.MerchantChecks)
	// A run that admitted nothing, or refused nothing, checked nothing.
	var paid, limited int
	for _, op := range h.Ops {
		switch {
		case op.Kind == "pay" && op.Status == 200:
			paid++
		case op.Status == 429:
			limited++
		}
	}
	if paid == 0 || limited == 0 || len(h.Orders) == 0 || len(h.Ledger) == 0 {
		t.Errorf("chaos: seed %d exercised too little to check: %d payments answered 200, %d answers 429, %d orders, %d ledger lines",
			run.seed, paid, limited, len(h.Orders), len(h.Ledger))
	}
	if rep.MerchantChecks == 0 {
		t.Errorf("chaos: seed %d held no admission to a merchant's own limit: the campaign no longer exercises limits per merchant", run.seed)
	}
	if missing := pathsNotLimited(rep.Paths); len(missing) > 0 {
		t.Errorf("chaos: seed %d drove no check of %s to its limit (no 429): the campaign no longer reaches every limiter path at its limit",
			run.seed, strings.Join(missing, ", "))
	}
	if len(rep.Violations) > 0 {
		var b strings.Builder
		for i, v := range rep.Violations {
			if i == 20 {
				fmt.Fprintf(&b, "… and %d more\n", len(rep.Violations)-20)
				break
			}
			fmt.Fprintf(&b, "%s\n", v)
		}
		kept := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-%d.jsonl", run.seed))
		if data, err := os.ReadFile(path); err == nil {
			_ = os.WriteFile(kept, data, 0o600)
		}
		t.Errorf("chaos: seed %d: %s\nfaults:\n%s\nviolations:\n%shistory: %s\nreplay: CHAOS_SEED=%d CHAOS_DURATION=%s make chaos",
			run.seed, rep.Summary(), c.faultList(), b.String(), kept, run.seed, run.duration)
	}
}

func newCampaign(t *testing.T, run chaosRun, docs *rand.Rand) *campaign {
	tag := runTag()
	c := &campaign{t: t, run: run, tag: tag, chA: "CA" + tag, chB: "CB" + tag, pay: "CPAY_" + tag, rf: "CRF_" + tag, dup: "CDUP_" + tag,
		plain: "CPLN_" + tag, plainLong: "CPLM_" + tag, cal: "CCAL_" + tag,
		token: "chaos-client-" + tag, admin: "chaos-admin-" + tag, policy: chaosPolicy(run.seed)}
	dir := t.TempDir()
	c.limitsPath = filepath.Join(dir, "limits.yaml")
	c.mariadb = testenv.StartMariaDB(t, testenv.MariaDBOptions{Durable: true})
	dsn, err := mysql.ParseDSN(c.mariadb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	read := *dsn
	read.ParseTime, read.Loc = true, time.UTC
	c.db, err = sql.Open("mysql", read.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.db.Close() })
	addrs := []string{freePort(t), freePort(t), freePort(t)}
	first := c.document(docs, 0)
	mustWrite(t, c.limitsPath, first)
	if addr := os.Getenv("PAYSERVER_TEST_NACOS_ADDR"); addr != "" && docs.IntN(3) == 0 {
		c.nacos, c.nacosID = addr, "payserver-chaos-"+strings.ToLower(tag)
		nacosPublish(t, c.nacos, c.nacosID, first)
	}
	c.startRedis()
	c.limits = []witness.LimitsDoc{{Raw: first, FromUs: time.Now().UnixMicro()}}
	c.emu = startEmulatorWith(t, "http://"+addrs[0], c.chA+","+c.chB)
	for i, addr := range addrs {
		in := &chaosInstance{name: fmt.Sprintf("i%d", i), db: startProxy(t, dsn.Addr), gw: startProxy(t, c.emu.addr)}
		d := *dsn
		d.Addr = in.db.addr
		env := map[string]string{
			"PAYSERVER_HTTP_ADDR":              addr,
			"PAYSERVER_CHANNELS":               c.chA + "," + c.chB,
			"PAYSERVER_CHANNEL_GATEWAY_URL":    "http://" + in.gw.addr,
			"PAYSERVER_CHANNEL_GATEWAY_SECRET": gatewaySecret,
			"PAYSERVER_CHANNEL_TIMEOUT":        "1s",
			"PAYSERVER_INSTANCE_COUNT":         "3",
			"PAYSERVER_CLIENT_TOKENS":          witness.Client + "=" + c.token,
			"PAYSERVER_ADMIN_TOKEN":            c.admin,
			"PAYSERVER_LOG_LEVEL":              "warn",
			"PAYSERVER_LIMITER_POLICY":         c.policy,
			"PAYSERVER_LOST_ANSWER_GRACE":      chaosLostAnswerGrace.String(),
		}
		c.redisEnv(in, env)
		if c.nacos != "" {
			env["PAYSERVER_NACOS_ADDR"], env["PAYSERVER_NACOS_DATA_ID"] = c.nacos, c.nacosID
		}
		in.srv = startServer(t, serverOptions{DSN: d.FormatDSN(), LimitsPath: c.limitsPath, Env: env, Config: "resolver: {backoff: 200ms, maxBackoff: 2s}\n"})
		c.instances = append(c.instances, in)
	}
	return c
}

// document draws a limits document: small sliding windows that fill, a
// money cap per minute, a calendar day in a zone, a channel-wide window
// with a reservation for the limit-API bizType (its own key with a day as
// well), a route over both
// channels, limits per merchant on the payment keys' short windows (every
// merchant's, and an override), a key of each shape the limiter checks
// differently (plain, calendar only) and, in later documents, a schedule.
func (c *campaign) document(r *rand.Rand, n int) string {
	zones := []string{"UTC", "Asia/Shanghai", "America/Santiago", "America/New_York"}
	var b strings.Builder
	fmt.Fprintf(&b, "window: 1s\nzone: %s\nroutes:\n  %s: [%s, %s]\nlimits:\n", zones[r.IntN(len(zones))], c.pay, c.chA, c.chB)
	for _, ch := range []string{c.chA, c.chB} {
		fmt.Fprintf(&b, "  %s:%s:\n", c.pay, ch)
		fmt.Fprintf(&b, "    - {limit: %d, window: 1s, perMerchant: %d, merchants: {%s: %d}}\n", 4+r.IntN(8), 1+r.IntN(3), chaosMerchants[r.IntN(len(chaosMerchants))], r.IntN(5))
		fmt.Fprintf(&b, "    - {limit: %d, window: 10s, perMerchant: %d}\n", 30+r.IntN(50), 8+r.IntN(12))
		fmt.Fprintf(&b, "    - {amount: %d, window: 1m, currency: CNY}\n", 150000+r.IntN(500000))
		fmt.Fprintf(&b, "    - {limit: %d, calendar: day, cutoff: \"%02d:00\"}\n", 600+r.IntN(1000), r.IntN(24))
	}
	fmt.Fprintf(&b, "  \"*:%s\":\n    - {limit: %d, window: 1s, reserve: {%s: %d}}\n", c.chA, 6+r.IntN(4), c.rf, 1+r.IntN(2))
	// A day too, with room: a slot an acquisition leaves behind (one its
	// answers say it does not own) is still in a live window at the dump.
	fmt.Fprintf(&b, "  %s:%s:\n    - {limit: %d, window: 1s}\n    - {limit: 100000, calendar: day}\n", c.rf, c.chA, 2+r.IntN(3))
	for _, ch := range []string{c.chA, c.chB} {
		// Room on both channels, and a day that keeps a slot left behind.
		fmt.Fprintf(&b, "  %s:%s:\n    - {limit: 50, window: 1s}\n    - {limit: 100000, calendar: day}\n", c.dup, ch)
	}
	// chB has no channel-wide rule, so these keys are checked alone.
	fmt.Fprintf(&b, "  %s:%s:\n    - {limit: %d, window: 1s}\n", c.plain, c.chB, 3+r.IntN(4))
	fmt.Fprintf(&b, "  %s:%s:\n    - {limit: %d, window: 5m}\n", c.plainLong, c.chB, 20+r.IntN(20))
	fmt.Fprintf(&b, "  %s:%s:\n    - {limit: %d, calendar: day, cutoff: \"%02d:00\"}\n    - {amount: %d, calendar: day, currency: CNY}\n",
		c.cal, c.chB, 40+r.IntN(40), r.IntN(24), 60000+r.IntN(60000))
	fmt.Fprintf(&b, "adaptive:\n  \"%s:%s\": off\n  \"%s:%s\": off\n", c.plain, c.chB, c.plainLong, c.chB)
	if n > 0 && r.IntN(3) == 0 {
		from := time.Now().Add(time.Duration(1+r.IntN(3)) * time.Second).UTC().Format(time.RFC3339)
		to := time.Now().Add(time.Duration(5+r.IntN(5)) * time.Second).UTC().Format(time.RFC3339)
		fmt.Fprintf(&b, "schedules:\n  - {key: \"%s:%s\", from: \"%s\", to: \"%s\", limits: %d}\n", c.pay, c.chB, from, to, r.IntN(3))
	}
	return b.String()
}

// publish writes a limits document to the watched file and records it,
// in force from now until every instance has the next one.
func (c *campaign) publish(doc string) {
	now := time.Now().UnixMicro()
	c.mu.Lock()
	c.limits = append(c.limits, witness.LimitsDoc{Raw: doc, FromUs: now})
	c.mu.Unlock()
	if c.nacos != "" {
		nacosPublish(c.t, c.nacos, c.nacosID, doc)
	} else {
		tmp := c.limitsPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
			c.t.Fatal(err)
		}
		if err := os.Rename(tmp, c.limitsPath); err != nil {
			c.t.Fatal(err)
		}
	}
	c.awaitDocument(doc)
}

// awaitDocument waits (up to 5s) until every running instance has doc in
// force, and ends the previous document's interval then.
func (c *campaign) awaitDocument(doc string) {
	want := documentMD5(doc)
	deadline := time.Now().Add(5 * time.Second)
	for _, in := range c.instances {
		for time.Now().Before(deadline) && in.alive() && in.md5(c.admin) != want {
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.mu.Lock()
	if n := len(c.limits); n > 1 {
		c.limits[n-2].ToUs = time.Now().UnixMicro()
	}
	c.mu.Unlock()
}

// documentMD5 is a document's version as payserver names it: the hex MD5
// of its bytes.
func documentMD5(doc string) string {
	sum := md5.Sum([]byte(doc))
	return hex.EncodeToString(sum[:])
}

func (in *chaosInstance) alive() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return !in.down
}

// md5 is the version of the limits document in force on the instance.
func (in *chaosInstance) md5(admin string) string {
	req, _ := http.NewRequest(http.MethodGet, in.srv.base+"/limits", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := (&http.Client{Timeout: time.Second}).Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		MD5 string `json:"md5"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.MD5
}

// client draws operations until ctx ends: pinned and routed payments,
// duplicates with the same and with another amount, retries of answers
// that never came, maxWaitMs, GET /pay, and acquire, release and peek
// through the limits API.
func (c *campaign) client(ctx context.Context, id int, r *rand.Rand) {
	hc := &http.Client{Timeout: 3 * time.Second}
	var sent []map[string]any // payments sent, for duplicates and retries
	for n := 0; ctx.Err() == nil; n++ {
		in := c.instances[r.IntN(len(c.instances))]
		switch p := r.IntN(115); {
		case p >= 100:
			c.atTheLimit(hc, id, n, r)
		case p < 50 || len(sent) == 0:
			body := map[string]any{"requestId": fmt.Sprintf("c%d-%d-%s", id, n, c.tag), "bizType": c.pay,
				"merchantId": chaosMerchants[r.IntN(len(chaosMerchants))], "amount": 100 + r.IntN(5000), "currency": []string{"CNY", "CNY", "CNY", "USD"}[r.IntN(4)]}
			switch r.IntN(3) {
			case 0:
				body["channel"] = c.chA
			case 1:
				body["channel"] = c.chB
			}
			if r.IntN(5) == 0 {
				body["maxWaitMs"] = 100 + r.IntN(900)
			}
			if c.payOp(hc, in, id, body) == 0 || r.IntN(4) == 0 {
				sent = append(sent, body)
			}
		case p < 58:
			c.payOp(hc, in, id, sent[r.IntN(len(sent))]) // a retry, or a duplicate with the same payload
		case p < 68:
			// Concurrent duplicates on two instances, routed or pinned, the
			// second with the same amount or another, on the same channel
			// or not: one claim wins.
			body := map[string]any{"requestId": fmt.Sprintf("d%d-%d-%s", id, n, c.tag), "bizType": c.pay,
				"merchantId": chaosMerchants[r.IntN(len(chaosMerchants))], "amount": 100 + r.IntN(5000), "currency": "CNY"}
			if r.IntN(2) == 0 {
				body["channel"] = c.chA
			}
			dup := map[string]any{}
			for k, v := range body {
				dup[k] = v
			}
			if r.IntN(3) > 0 {
				dup["amount"] = body["amount"].(int) + 1 + r.IntN(100)
			}
			switch r.IntN(4) { // the same channel, the other one, or routed: a claim lost to another channel
			case 0:
				dup["channel"] = c.chB
			case 1:
				delete(dup, "channel")
			case 2:
				// Pinned to both channels at once: whichever claim loses
				// took a slot on a channel its order never reaches.
				body["channel"], dup["channel"] = c.chA, c.chB
				body["bizType"], dup["bizType"] = c.dup, c.dup
			}
			other := c.instances[r.IntN(len(c.instances))]
			var both sync.WaitGroup
			start := make(chan struct{})
			both.Add(1)
			go func() { defer both.Done(); <-start; c.payOp(hc, other, id, dup) }()
			close(start)
			c.payOp(hc, in, id, body)
			both.Wait()
			sent = append(sent, body)
		case p < 71:
			dup := map[string]any{}
			for k, v := range sent[r.IntN(len(sent))] {
				dup[k] = v
			}
			dup["amount"] = dup["amount"].(int) + 1 + r.IntN(100) // the same requestId, another amount
			c.payOp(hc, in, id, dup)
		case p < 80:
			rid := sent[r.IntN(len(sent))]["requestId"].(string)
			c.call(hc, in, id, witness.Op{Kind: "getPay", RequestID: rid}, http.MethodGet, "/pay/"+rid, nil, "")
		case p < 90:
			// The limits-API bizType on chA, where the windows are often
			// full, or the roomy duplicates' key on chB, where a lost
			// answer's call has most often recorded its member.
			op := witness.Op{Kind: "acquire", RequestID: fmt.Sprintf("a%d-%d-%s", id, n, c.tag), BizType: c.rf, Channel: c.chA}
			if r.IntN(2) == 0 {
				op.BizType, op.Channel = c.dup, c.chB
			}
			if r.IntN(2) == 0 {
				op.Amount, op.Currency = int64(100+r.IntN(1000)), []string{"CNY", "USD"}[r.IntN(2)]
			}
			c.acquireOp(hc, in, id, op)
		case p < 96:
			c.mu.Lock()
			var a acquired
			if len(c.acquire) > 0 {
				a = c.acquire[r.IntN(len(c.acquire))]
			}
			c.mu.Unlock()
			if a.rid != "" {
				c.call(hc, in, id, witness.Op{Kind: "release", RequestID: a.rid, BizType: a.bizType, Channel: a.channel}, http.MethodPost, "/v1/limits/release",
					map[string]any{"bizType": a.bizType, "channel": a.channel, "requestId": a.rid}, c.token)
			}
		default:
			c.call(hc, in, id, witness.Op{Kind: "peek"}, http.MethodGet, "/v1/limits/peek?bizType="+c.rf+"&channel="+c.chA, nil, c.token)
		}
		time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond)
	}
}

// acquired is an acquisition answered 200, for a later release.
type acquired struct{ rid, bizType, channel string }

// acquireOp sends one POST /v1/limits/acquire for op and logs it; an
// admission is remembered for a release.
func (c *campaign) acquireOp(hc *http.Client, in *chaosInstance, client int, op witness.Op) int {
	body := map[string]any{"bizType": op.BizType, "channel": op.Channel, "requestId": op.RequestID}
	if op.Amount != 0 {
		body["amount"], body["currency"] = op.Amount, op.Currency
	}
	st := c.call(hc, in, client, op, http.MethodPost, "/v1/limits/acquire", body, c.token)
	if st == 200 {
		c.mu.Lock()
		c.acquire = append(c.acquire, acquired{op.RequestID, op.BizType, op.Channel})
		c.mu.Unlock()
	}
	return st
}

// chaosMerchants are the merchants the campaign's payments name: few, so
// that each fills its own limit in the payment keys' short windows.
var chaosMerchants = []string{"M1", "M2", "M3", "M4"}

// atTheLimit drives one of chB's single-shape keys (plain for 1 s, plain
// for 5 min, calendar only) past its limit: a burst of 2 to 5 payments or
// acquisitions sent at once to random instances, some with a concurrent
// duplicate at another amount (the limiter's identity check: a member held
// for another amount is a conflict, never a duplicate), and, after the
// burst, retries of some at the same amount and at another.
func (c *campaign) atTheLimit(hc *http.Client, id, n int, r *rand.Rand) {
	biz := []string{c.plain, c.plain, c.plainLong, c.cal}[r.IntN(4)]
	acquire := r.IntN(3) == 0
	type req struct {
		in *chaosInstance
		op witness.Op
	}
	var burst []req
	for i := range 2 + r.IntN(4) {
		op := witness.Op{Kind: "pay", RequestID: fmt.Sprintf("l%d-%d-%d-%s", id, n, i, c.tag), BizType: biz, Channel: c.chB,
			Amount: int64(100 + r.IntN(3000)), Currency: "CNY", MerchantID: "M1"}
		if acquire {
			op.Kind, op.RequestID = "acquire", "q"+op.RequestID[1:]
		}
		burst = append(burst, req{c.instances[r.IntN(len(c.instances))], op})
		if r.IntN(3) == 0 {
			dup := op
			dup.Amount += int64(1 + r.IntN(100))
			burst = append(burst, req{c.instances[r.IntN(len(c.instances))], dup})
		}
	}
	send := func(q req) int {
		if q.op.Kind == "acquire" {
			return c.acquireOp(hc, q.in, id, q.op)
		}
		return c.payOp(hc, q.in, id, map[string]any{"requestId": q.op.RequestID, "bizType": q.op.BizType, "channel": q.op.Channel,
			"merchantId": q.op.MerchantID, "amount": int(q.op.Amount), "currency": q.op.Currency})
	}
	var wg sync.WaitGroup
	for _, q := range burst {
		wg.Add(1)
		go func() { defer wg.Done(); send(q) }()
	}
	wg.Wait()
	for _, q := range burst {
		if r.IntN(3) != 0 {
			continue
		}
		q.in = c.instances[r.IntN(len(c.instances))]
		if r.IntN(2) == 0 {
			q.op.Amount += int64(1 + r.IntN(100))
		}
		send(q)
	}
}

// payOp sends one POST /pay and logs it; it returns the status (0: no
// answer).
func (c *campaign) payOp(hc *http.Client, in *chaosInstance, id int, body map[string]any) int {
	op := witness.Op{Kind: "pay", RequestID: body["requestId"].(string), BizType: body["bizType"].(string), Amount: int64(body["amount"].(int)), Currency: body["currency"].(string),
		MerchantID: body["merchantId"].(string)}
	if ch, ok := body["channel"].(string); ok {
		op.Channel = ch
	}
	return c.call(hc, in, id, op, http.MethodPost, "/pay", body, "")
}

// call sends one request, logs it as op with its times and answer, and
// returns the status (0 when no answer came).
func (c *campaign) call(hc *http.Client, in *chaosInstance, client int, op witness.Op, method, path string, body map[string]any, token string) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, in.srv.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	op.Seq, op.Client, op.Instance = c.seq.Add(1), strconv.Itoa(client), in.name
	op.InvokeUs = time.Now().UnixMicro()
	resp, err := hc.Do(req)
	if err != nil {
		op.Error = err.Error()
	} else {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			op.Error = rerr.Error()
		} else {
			op.CompleteUs, op.Status = time.Now().UnixMicro(), resp.StatusCode
			if json.Valid(b) {
				op.Body = b
			}
		}
	}
	c.mu.Lock()
	c.ops = append(c.ops, op)
	c.mu.Unlock()
	return op.Status
}

// nemesis draws a fault every few seconds until ctx ends; each fault heals
// itself after a while, and is recorded with its interval.
func (c *campaign) nemesis(ctx context.Context, r *rand.Rand) {
	docs := 1
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(300+r.IntN(2500)) * time.Millisecond):
		}
		in := c.instances[r.IntN(len(c.instances))]
		hold := time.Duration(500+r.IntN(2500)) * time.Millisecond
		switch r.IntN(15) {
		case 13: // Redis killed and restarted empty, or its master failed over
			c.redisLost(r, hold)
		case 14: // MariaDB killed and restarted (durable: every committed order survives)
			c.fault("mariadb", "", hold, func() { c.mariadb.Kill() }, func() { c.mariadb.Start() })
		case 0: // SIGKILL an instance, restart it later
			c.fault("instance", in.name, hold, func() { in.kill() }, func() { in.restart() })
		case 1: // SIGSTOP, then SIGCONT
			c.fault("instance", in.name, hold, func() { in.signal(syscall.SIGSTOP) }, func() { in.signal(syscall.SIGCONT) })
		case 2: // a graceful restart
			c.fault("instance", in.name, 0, func() { in.srv.stop(); in.restart() }, func() {})
		case 3: // Redis unreachable for every instance (Sentinel, Cluster: a master's failover)
			if c.topology != "standalone" {
				c.redisLost(r, hold)
				break
			}
			// Half the time the limits change halfway through: the
			// in-process windows, the merchants' uses among them, keep
			// what they hold across it.
			var change string
			if r.IntN(2) == 0 {
				change = c.document(r, docs)
				docs++
			}
			c.fault("redis", "", hold, func() {
				c.each(func(p *chaosInstance) { p.redis.Down() })
				if change != "" {
					time.Sleep(hold / 2)
					c.publish(change)
				}
			}, func() { c.each(func(p *chaosInstance) { p.redis.Up() }) })
		case 4: // Redis slow for one instance, or its answers cut once a call ran: lost answers (standalone only: the proxy)
			if c.topology != "standalone" {
				break
			}
			if r.IntN(2) == 0 {
				c.fault("redis", "", hold, func() { in.redis.CutArrays(true) }, func() { in.redis.CutArrays(false) })
				break
			}
			d := time.Duration(20+r.IntN(300)) * time.Millisecond
			c.fault("redis", "", hold, func() { in.redis.Slow(d) }, func() { in.redis.Slow(0) })
		case 5: // MariaDB unreachable for one instance, cut as it answers, or slow
			how, d := r.IntN(3), time.Duration(20+r.IntN(400))*time.Millisecond
			c.fault("mariadb", in.name, hold, func() {
				switch how {
				case 0:
					in.db.CutReplies(true)
				case 1:
					in.db.Down()
				default:
					in.db.Slow(d)
				}
			}, func() { in.db.CutReplies(false); in.db.Slow(0); in.db.Up() })
		case 6: // the emulator unreachable from one instance: payments NOT_SENT, routed ones move on
			c.fault("emulator", in.name, hold, func() { in.gw.Down() }, func() { in.gw.Up() })
		case 7: // the emulator's answers cut after the request left, or slow
			if r.IntN(2) == 0 {
				c.fault("emulator", in.name, hold, func() { in.gw.CutReplies(true) }, func() { in.gw.CutReplies(false) })
			} else {
				d := time.Duration(200+r.IntN(1200)) * time.Millisecond
				c.fault("emulator", in.name, hold, func() { in.gw.Slow(d) }, func() { in.gw.Slow(0) })
			}
		case 8, 9, 10: // a channel misbehaves: refuses, throttles, declines, lost answers, pauses, PROCESSING
			ch := c.chA
			if r.IntN(2) == 0 {
				ch = c.chB
			}
			b := []map[string]any{{"refuseRate": 0.5}, {"throttleCapacity": 1, "throttleWindowMs": 1000}, {"declineRate": 0.5},
				{"lostAnswerRate": 0.3}, {"pauseMs": 800}, {"processingRate": 0.5, "processingMs": 1000}, {"dropRate": 0.2}, {"errorRate": 0.5}}[r.IntN(8)]
			c.fault("channel", ch, hold, func() { c.emu.set(ch, b) }, func() { c.emu.calm(ch) })
		default: // a new limits document: lowered, raised, a schedule
			c.publish(c.document(r, docs))
			docs++
		}
	}
}

// fault breaks something for hold (0: at once, healed by the break
// itself), recording the interval; lost, for a Redis fault, is how many
// window writes it may have lost (-1: all of them).
func (c *campaign) fault(kind, target string, hold time.Duration, brk, heal func(), lost ...int64) {
	f := witness.Fault{Kind: kind, Target: target, FromUs: time.Now().UnixMicro()}
	if len(lost) > 0 {
		f.LostWrites = lost[0]
	}
	brk()
	time.Sleep(hold)
	heal()
	f.ToUs = time.Now().UnixMicro()
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
}

func (c *campaign) each(f func(*chaosInstance)) {
	for _, in := range c.instances {
		f(in)
	}
}

func (in *chaosInstance) kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.srv.cmd != nil && in.srv.cmd.Process != nil {
		_ = in.srv.cmd.Process.Kill()
		<-in.srv.done
	}
	in.down = true
}

func (in *chaosInstance) signal(sig syscall.Signal) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.down && in.srv.cmd != nil && in.srv.cmd.Process != nil {
		_ = in.srv.cmd.Process.Signal(sig)
	}
}

func (in *chaosInstance) restart() {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.srv.done:
		in.srv.start()
	default:
	}
	in.down = false
}

// heal ends every fault: instances running, proxies passing, channels calm.
func (c *campaign) heal() {
	for _, in := range c.instances {
		in.signal(syscall.SIGCONT)
		in.restart()
		if in.redis != nil {
			in.redis.Up()
			in.redis.Slow(0)
		}
		in.db.Up()
		in.db.CutReplies(false)
		in.gw.Up()
		in.gw.Slow(0)
		in.gw.CutReplies(false)
	}
	c.emu.calm(c.chA)
	c.emu.calm(c.chB)
}

// awaitQuiet waits until no order is PROCESSING or UNKNOWN (the resolver
// ends them with the emulator's word), or within.
func (c *campaign) awaitQuiet(within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var n int
		if err := c.db.QueryRow("SELECT COUNT(*) FROM orders WHERE status IN ('PROCESSING','UNKNOWN')").Scan(&n); err == nil && n == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// collect reads the run's end: the orders, the ledger and the window
// members, and gathers the history.
func (c *campaign) collect(quietFrom int64) witness.History {
	t := c.t
	h := witness.History{Config: witness.Config{Instances: 3, Policy: c.policy, QuietFromUs: quietFrom}}
	rows, err := c.db.Query(`SELECT order_no, request_id, biz_type, channel, amount, currency, merchant_id, status, COALESCE(channel_trade_no,''),
		COALESCE(failure_code,''), created_at, updated_at, COALESCE(routed_from,''), admitted_at_us, COALESCE(admitted_keys,''),
		COALESCE(limits_version,''), COALESCE(resolved_by,''), resolved_at_us FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o witness.Order
		var created, updated time.Time
		if err := rows.Scan(&o.OrderNo, &o.RequestID, &o.BizType, &o.Channel, &o.Amount, &o.Currency, &o.MerchantID, &o.Status, &o.ChannelTradeNo,
			&o.FailureCode, &created, &updated, &o.RoutedFrom, &o.AdmittedAtUs, &o.AdmittedKeys, &o.LimitsVersion, &o.ResolvedBy, &o.ResolvedAtUs); err != nil {
			t.Fatal(err)
		}
		o.CreatedAtUs, o.UpdatedAtUs = created.UnixMicro(), updated.UnixMicro()
		h.Orders = append(h.Orders, o)
	}
	_ = rows.Close()
	resp, err := http.Get(c.emu.base() + "/ledger")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var l witness.LedgerEntry
		if err := dec.Decode(&l); err != nil {
			break
		}
		h.Ledger = append(h.Ledger, l)
	}
	resp.Body.Close()
	ctx := context.Background()
	first, err := c.redisOf(ctx, c.chA)
	if err != nil {
		t.Fatal(err)
	}
	now, err := first.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	h.Config.DumpedAtUs = now.UnixMicro()
	for _, ch := range []string{c.chA, c.chB} {
		rdb, err := c.redisOf(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		iter := rdb.Scan(ctx, 0, "payserver:rl:{"+ch+"}:*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			if strings.HasSuffix(key, ":v") || strings.HasSuffix(key, ":L") || strings.Contains(key, ":#") {
				continue // a sliding amount window's weights, a learned limit, a member's identity
			}
			switch rdb.Type(ctx, key).Val() {
			case "zset":
				// A sliding amount window keeps its members' amounts in
				// its ":v" hash: the amount each was counted for.
				amounts, _ := rdb.HGetAll(ctx, key+":v").Result()
				zs, _ := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
				for _, z := range zs {
					m := witness.Member{Key: key, Member: z.Member.(string), ScoreUs: int64(z.Score)}
					m.Amount, _ = strconv.ParseInt(amounts[m.Member], 10, 64)
					h.Members = append(h.Members, m)
				}
			case "hash":
				fields, _ := rdb.HGetAll(ctx, key).Result()
				for f, v := range fields {
					if strings.HasPrefix(f, "#") && !strings.HasPrefix(f, "#api:") && !strings.HasPrefix(f, "#resolve:") {
						continue // the hash's own fields (its period, its sum)
					}
					a, _ := strconv.ParseInt(v, 10, 64)
					h.Members = append(h.Members, witness.Member{Key: key, Member: f, Amount: a})
				}
			}
		}
	}
	c.mu.Lock()
	h.Ops, h.Faults, h.Limits = c.ops, c.faults, c.limits
	c.mu.Unlock()
	return h
}

func (c *campaign) writeHistory(h witness.History) string {
	path := os.Getenv("CHAOS_HISTORY")
	if path == "" {
		path = filepath.Join(c.t.TempDir(), "history.jsonl")
	}
	f, err := os.Create(path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if err := witness.WriteHistory(f, h); err != nil {
		c.t.Fatal(err)
	}
	return path
}

func (c *campaign) faultList() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, f := range c.faults {
		fmt.Fprintf(&b, "  %s %s %s +%v\n", f.Kind, f.Target, time.UnixMicro(f.FromUs).UTC().Format("15:04:05.000"), time.Duration(f.ToUs-f.FromUs)*time.Microsecond)
	}
	return b.String()
}

// pathSummary is the witness's count of limiter checks by path, e.g.
// "plain 812 (301), several windows 4100 (950), …".
func pathSummary(paths []witness.PathCount) string {
	var parts []string
	for _, p := range paths {
		parts = append(parts, fmt.Sprintf("%s %d (%d)", p.Path, p.Checks, p.Refused))
	}
	return strings.Join(parts, ", ")
}

// pathsNotLimited lists the limiter paths the campaign drives to their
// limit that no 429 of the run reached.
func pathsNotLimited(paths []witness.PathCount) []string {
	refused := map[string]int{}
	for _, p := range paths {
		refused[p.Path] = p.Refused
	}
	var out []string
	for _, p := range []string{witness.PathPlain, witness.PathSeveral, witness.PathReserved, witness.PathCalendar, witness.PathAmount, witness.PathLearned} {
		if refused[p] == 0 {
			out = append(out, p)
		}
	}
	return out
}
