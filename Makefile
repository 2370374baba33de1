# payserver: the two commands are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
# No build tags or flags: every go command make runs builds what a plain
# `go run`, `go build` or `go test` builds, so each reuses the others' cache
# (docs/PERFORMANCE.md, "Cold build").
# The shared test servers (Redis, Redis Cluster, MariaDB, Nacos): the testenv
# command starts them on free loopback ports under a temporary directory, runs
# the command after -- with their PAYSERVER_TEST_* variables, and stops them.
# integration/ starts its own in TestMain.
TESTENV = $(GO) run ./internal/testenv/cmd/testenv

.PHONY: chaos bench-adaptive run build test unit bench-smoke services install-services browser alerts integration vet bench bench-e2e bench-scale bench-codec bench-routing bench-gateway bench-nacos fuzz schemathesis vulncheck check-limits clean
FUZZTIME ?= 30s

## run: start payserver in the embedded default (SQLite, the in-process limiter journaled in the data dir, configs/channel-limits.yaml, channel simulators)
# It builds bin/payserver and runs it, not `go run`: interrupted by Ctrl-C, go
# run exits 1 although payserver stopped cleanly, and make reported an error.
# At a terminal, payserver runs as its own job (set -m): Ctrl-C reaches it
# alone, and make exits with its status, 0 after a clean stop. make itself
# never gets the SIGINT, which would make it exit 130 whatever payserver
# did. Without a terminal (CI, timeout) it runs as any recipe, so that a
# signal sent to the process group still reaches it.
# The banner payserver prints once it is up says how to try it.
run:
	$(GO) build -o bin/payserver ./cmd/payserver
	@if [ -t 0 ]; then set -m; fi; ./bin/payserver; exit $$?

build:
	$(GO) build -o bin/payserver ./cmd/payserver

## test: vet + gofmt, promtool rule tests, unit tests with the race detector (model property tests on every store), integration tests on real MariaDB, Redis, Redis Cluster, Sentinel, TLS servers and Nacos (single and 3-node), a 5 s fuzz pass, govulncheck
## (integration tests run payserver binaries built with -race, except latency tests; the test process itself runs without -race)
test: vet install-services browser alerts
	$(TESTENV) -- $(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v /integration)
	cd api/client && $(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run TestCalendarTilesEveryZone ./internal/ratelimit/
	$(MAKE) bench-smoke
	$(GO) test -count=1 -timeout 20m -skip TestChaosCampaign ./integration/ ./integration/chaos/...
	CHAOS_DURATION=$${CHAOS_DURATION:-40s} $(GO) test -count=1 -v -timeout 15m -run TestChaosCampaign ./integration/
	FUZZTIME=5s scripts/fuzz.sh
	scripts/govulncheck.sh

vet:
	$(GO) vet ./...
	cd api/client && $(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal integration api migrations bench 2>/dev/null)" || { echo "gofmt needed:"; gofmt -l cmd internal integration api migrations bench; exit 1; }

## install-services: install (if missing) Redis, MariaDB and r-nacos; nothing is started
install-services:
	scripts/install-services.sh

## services: start the shared test servers on free loopback ports and print their PAYSERVER_TEST_* variables; Ctrl-C stops them
services: install-services
	$(TESTENV)

## alerts: promtool (Debian's prometheus package) checks deploy/prometheus/alerts.yml and runs its unit tests;
## integration/metrics_exist_test.go (in the integration step) checks the rules' and dashboard's metrics exist
alerts:
	scripts/install-promtool.sh
	promtool check rules deploy/prometheus/alerts.yml
	cd deploy/prometheus && promtool test rules alerts_test.yml

## browser: Debian's chromium for the dashboard test (no browser downloads)
browser:
	scripts/install-chromium.sh

unit: install-services
	$(TESTENV) -- $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)

integration: install-services
	$(GO) test -count=1 -v ./integration/

check-limits:
	$(GO) run ./cmd/payserver check-limits configs/channel-limits.yaml

clean:
	rm -rf bin

## bench-smoke: every contender of the limiter benchmark once, briefly (a benchmark that no longer runs measures nothing); make test runs it
bench-smoke:
	$(TESTENV) -services redis -- $(GO) run ./bench/limiter -duration 200ms -warmup 100ms -rounds 1 -alloc-checks 200 > /dev/null

## bench: limiter micro-benchmarks against a real Redis, with side-by-side ratios
bench: install-services
	scripts/bench.sh

## bench-nacos: publish-to-enforcement latency over 50 Nacos publishes, 2 instances (r-nacos)
bench-nacos: install-services
	@mkdir -p bench/out
	@$(GO) run ./bench/benchenv/cmd/benchenv begin -state bench/out/nacos-benchenv.json -title "Nacos publish to enforcement (TestNacosPropagation)"
	set -o pipefail; PAYSERVER_IT_PUBLISHES=50 $(GO) test -count=1 -v -run TestNacosPropagation ./integration/ | grep -E 'PROPAGATION|^(ok|FAIL|---)'
	@$(GO) run ./bench/benchenv/cmd/benchenv end -state bench/out/nacos-benchenv.json

## fuzz: every go test -fuzz target for FUZZTIME each (default 30s); failing inputs go to testdata/fuzz
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## schemathesis: schema-based API fuzzing of an embedded payserver against api/openapi.yaml (ST_MAX_EXAMPLES, default 50)
schemathesis:
	scripts/schemathesis.sh

## vulncheck: govulncheck on ./... (skipped with a message when the vulnerability database is unreachable)
vulncheck:
	scripts/govulncheck.sh

## bench-e2e: end-to-end POST /pay on a durable MariaDB (an instance of its own) and Redis, ratios side by side (about 7 minutes)
bench-e2e: install-services
	scripts/bench-e2e.sh

## bench-scale: cost curves as tables, each with its conditions: a limiter check against 1k to 1M members in its window (sliding count, sliding
## amount, calendar day; admitted and refused, unbatched and coalesced; Redis memory per member), against 1 to 8 windows per key with and without a
## channel-wide key, a limits document of 1k and 10k keys (parse, SetConfig, GET /limits, /dashboard, the reports) and 100k keys in Redis, and POST /pay
## at 1, 2 and 3 instances (SCALE_PAY=0 skips it), and a check on a key with limits per merchant with 1 and 10,000 merchants in its window (Redis memory per
## merchant and per member); SCALE_ARGS passes flags (e.g. SCALE_ARGS='-sizes 1000,10000 -checks 2000'); also written to
## bench/out/scale.txt (about 4 minutes)
bench-scale: install-services
	@mkdir -p bench/out
	set -o pipefail; $(TESTENV) -services redis,mariadb-durable -- $(GO) run ./bench/scale $(SCALE_ARGS) 2>&1 | tee bench/out/scale.txt

## bench-routing: a routed POST /pay (no channel) against a pinned one, and one falling back past a full candidate, side by side on the durable MariaDB (about 2 minutes)
bench-routing: install-services
	scripts/bench-routing.sh

## profile: CPU and allocation profiles of the admitted path under load
profile: install-services
	scripts/profile.sh

## bench-gateway: POST /pay through the HTTP channel gateway (the emulator) against the in-process simulator, side by side on the durable MariaDB, and the resolver's time from UNKNOWN to resolved (about 1 minute)
bench-gateway: install-services
	scripts/bench-gateway.sh

## bench-codec: encoding/json against goccy/go-json and sonic on the pay path's payloads (bench/codec, a module of its own; its header,
## bench/benchenv, is printed around it from this module)
bench-codec:
	@mkdir -p bench/out
	@$(GO) run ./bench/benchenv/cmd/benchenv begin -state bench/out/codec-benchenv.json -title "JSON codecs on the pay path's payloads (bench/codec)"
	cd bench/codec && $(GO) run . -benchtime 300ms -rounds 3
	@$(GO) run ./bench/benchenv/cmd/benchenv end -state bench/out/codec-benchenv.json

## bench-adaptive: learned limits against adaptive: off, side by side in one run: a channel at 60% of its configured limit, 3 instances at
## twice the limit for 60 s (throttles and goodput from the emulator's ledger), recovery once the capacity is back, and routed goodput (about 2 minutes)
bench-adaptive: install-services
	@mkdir -p bench/out
	@$(GO) run ./bench/benchenv/cmd/benchenv begin -state bench/out/adaptive-benchenv.json -title "learned limits against adaptive: off (TestAdaptiveLimits, TestAdaptiveRoutedGoodput)"
	set -o pipefail; PAYSERVER_IT_ADAPTIVE_LOAD=60s $(GO) test -count=1 -v -timeout 15m -run 'TestAdaptiveLimits|TestAdaptiveRoutedGoodput' ./integration/ | grep -E '^ADAPTIVE|^(ok|FAIL|---)'
	@$(GO) run ./bench/benchenv/cmd/benchenv end -state bench/out/adaptive-benchenv.json

## chaos: one seeded chaos campaign (CHAOS_SEED, default the clock; CHAOS_DURATION, default 10m; CHAOS_REDIS and CHAOS_POLICY, default drawn): 3 payserver instances on MariaDB,
## Redis (standalone, Sentinel or Cluster) and the channel emulator under faults, its history checked by the independent witness (docs/RELIABILITY.md, "The chaos campaign")
chaos: install-services
	CHAOS_DURATION=$${CHAOS_DURATION:-10m} $(GO) test -count=1 -v -timeout 6h -run 'TestChaosCampaign|TestChaosCalendar' ./integration/

## failover: only the failover test (also in `make test`): 3 instances on a cluster of the test's own (3 masters + 3 replicas),
## 40 s load per policy (local, deny), the key's master killed and failed over (about 1.5 min)
failover: install-services
	$(GO) test -count=1 -v -run TestRedisClusterFailover -timeout 10m ./integration/
