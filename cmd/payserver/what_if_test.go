package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"payserver/internal/testenv"
	"payserver/internal/testutil"
	"payserver/internal/whatif"
)

// TestWhatIfReplaysRealTraffic drives payments through real Redis and the
// decision log, then replays them: the documents in force reproduce the
// record (fidelity ≥ 0.99), a proposal equal to the document in force
// changes nothing, and a lower limit refuses newly. It runs on standalone
// Redis with the embedded SQLite file and with MariaDB, and on a Redis
// Cluster.
func TestWhatIfReplaysRealTraffic(t *testing.T) {
	if !testenv.Installed() {
		t.Skip("redis-server not installed")
	}
	t.Run("standalone/sqlite", func(t *testing.T) {
		rd := testenv.StartRedis(t, testenv.RedisOptions{})
		replayRealTraffic(t, func(cfg *Config) []string {
			cfg.RedisMode, cfg.RedisAddrs = RedisStandalone, []string{rd.Addr}
			return []string{"PAYSERVER_DATA_DIR=" + cfg.DataDir}
		})
	})
	t.Run("standalone/mariadb", func(t *testing.T) {
		dsn := testutil.MustFreshMySQL(t)
		rd := testenv.StartRedis(t, testenv.RedisOptions{})
		replayRealTraffic(t, func(cfg *Config) []string {
			cfg.RedisMode, cfg.RedisAddrs = RedisStandalone, []string{rd.Addr}
			cfg.MySQLDSN, cfg.AutoMigrate = dsn, true
			return []string{"PAYSERVER_MYSQL_DSN=" + dsn}
		})
	})
	t.Run("cluster/sqlite", func(t *testing.T) {
		cluster := testenv.StartCluster(t, testenv.ClusterOptions{})
		replayRealTraffic(t, func(cfg *Config) []string {
			cfg.RedisMode, cfg.RedisAddrs = RedisCluster, cluster.Addrs()
			return []string{"PAYSERVER_DATA_DIR=" + cfg.DataDir}
		})
	})
}

// replayRealTraffic runs payserver as setup configures it (its Redis and
// database), sends 200 payments over a limit of 5 a second, and replays
// them with `payserver what-if --json` in the environment setup returns.
func replayRealTraffic(t *testing.T, setup func(*Config) []string) {
	dir := t.TempDir()
	cfg := embeddedConfig(t, dir)
	const doc = "limits:\n  ONLINE_PAY:ALIPAY: 5\n"
	if err := os.WriteFile(cfg.LimitsFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := setup(&cfg)
	m := NewMain(cfg, slog.New(slog.DiscardHandler))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for i := range 200 {
		body := fmt.Sprintf(`{"requestId":"wi-%d","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M%d","amount":1000,"currency":"CNY"}`, i, i%3)
		resp, err := http.Post("http://"+m.Addr()+"/pay", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			admitted++
		}
		resp.Body.Close()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if admitted == 0 || admitted == 200 {
		t.Fatalf("%d of 200 admitted: the traffic must meet the limit", admitted)
	}
	replay := func(proposal string) whatif.Result {
		t.Helper()
		file := filepath.Join(dir, "proposed.yaml")
		if err := os.WriteFile(file, []byte(proposal), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := run([]string{"what-if", file, "--json"}, env, &out, &errOut); code != 0 {
			t.Fatalf("what-if exited %d: %s", code, errOut.String())
		}
		var res whatif.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if res.Fidelity < 0.99 {
			t.Errorf("fidelity %v, want ≥ 0.99:\n%s", res.Fidelity, errOut.String())
		}
		if !strings.Contains(errOut.String(), "of 200 recorded decisions") {
			t.Errorf("fidelity not measured on every decision: %s", errOut.String())
		}
		t.Logf("%s proposed: %+v; %s", strings.TrimSpace(proposal), res.Keys[0].Proposed, strings.TrimSpace(errOut.String()))
		return res
	}
	same := replay(doc)
	if len(same.Keys) != 1 || same.Keys[0].Offered != 200 {
		t.Fatalf("keys %+v, want ONLINE_PAY:ALIPAY offered 200", same.Keys)
	}
	k := same.Keys[0]
	if k.Actual.Admitted != int64(admitted) {
		t.Errorf("actual admitted %d, want %d (POST /pay's)", k.Actual.Admitted, admitted)
	}
	if k.NewlyRefused != 0 || k.NewlyAdmitted != 0 {
		t.Errorf("the document in force, proposed, changes %d refusals and %d admissions; want none", k.NewlyRefused, k.NewlyAdmitted)
	}
	lower := replay("limits:\n  ONLINE_PAY:ALIPAY: 1\n")
	if lk := lower.Keys[0]; lk.NewlyRefused == 0 || len(lk.Merchants) == 0 || lk.Proposed.Admitted >= lk.Actual.Admitted {
		t.Errorf("a lower limit: %+v; want merchants newly refused", lk)
	}
}
