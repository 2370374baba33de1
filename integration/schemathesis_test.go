package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestSchemathesis runs schema-based API fuzzing (schemathesis from PyPI,
// scripts/schemathesis.sh; /v1/limits with a client token, admin routes
// with the admin token) against a payserver on real MariaDB and Redis:
// every check, a bounded number of examples per operation
// (PAYSERVER_IT_SCHEMATHESIS_EXAMPLES, default 50). It must find no 5xx and
// no answer that breaks api/openapi.yaml, and the server must log no
// internal error. The script's content-type sweep runs too: every
// state-changing operation must answer bodies of other types (text/plain,
// forms, multipart, XML, charset=latin1, none) with a documented JSON 415,
// and every path a 100 KB query and 20 KiB of headers with JSON 414/431. `make schemathesis` runs the same script on the embedded
// default.
func TestSchemathesis(t *testing.T) {
	if testing.Short() {
		t.Skip("schema fuzzing is not short")
	}
	for _, bin := range []string{"python3", "bash", "flock"} {
		if _, err := exec.LookPath(bin); err != nil {
			if testutil.CI() {
				t.Fatalf("%s not found: schemathesis needs it", bin)
			}
			t.Skipf("%s not found", bin)
		}
	}
	examples := "50"
	if n := envInt("PAYSERVER_IT_SCHEMATHESIS_EXAMPLES"); n > 0 {
		examples = os.Getenv("PAYSERVER_IT_SCHEMATHESIS_EXAMPLES")
	}
	token := "st-" + testutil.UniqueName("TOK")
	clientToken := "stc-" + testutil.UniqueName("CLIENTTOK")
	s := startServer(t, serverOptions{
		// Schemathesis sends wrong tokens on purpose: the failed-authentication
		// budget of one address must not answer its later calls 429.
		Env: map[string]string{"PAYSERVER_ADMIN_TOKEN": token, "PAYSERVER_CLIENT_TOKENS": "schemathesis=" + clientToken,
			"PAYSERVER_AUTH_MAX_FAILURES": "1000000"},
		// The same limits and channels as the script's embedded run.
		Limits: `window: 1s
limits:
  ONLINE_PAY:ALIPAY: 100
  ONLINE_PAY:WECHAT: -1
  ONLINE_PAY:UNIONPAY: 0
  DEMO:ALIPAY: {limit: 2, window: 1s}
  REFUND:ALIPAY:
    - {limit: 20, window: 1s}
    - {limit: 600, window: 1m}
`,
		Config: "channelTimeout: 300ms\nchannels:\n  ALIPAY: {declineRate: 0.1, timeoutRate: 0.02}\n  WECHAT: {}\n  UNIONPAY: {declineRate: 0.5}\n",
	})
	start := time.Now()
	cmd := exec.Command("bash", "../scripts/schemathesis.sh")
	cmd.Env = append(os.Environ(),
		"ST_BASE_URL="+s.base, "ST_TOKEN="+token, "ST_CLIENT_TOKEN="+clientToken, "ST_SERVER_LOG="+s.logPath, "ST_MAX_EXAMPLES="+examples)
	out, err := cmd.CombinedOutput()
	summary := []string{}
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "schemathesis.sh:") || strings.Contains(l, "generated,") || strings.HasPrefix(l, "Seed:") ||
			strings.HasPrefix(l, "=====") || strings.Contains(l, "passed") || strings.Contains(l, "failed") {
			summary = append(summary, l)
		}
	}
	t.Logf("schemathesis on real MariaDB and Redis, %s examples per operation, %v:\n%s", examples, time.Since(start).Round(time.Second), strings.Join(summary, "\n"))
	if err != nil {
		t.Fatalf("schemathesis failed: %v\n%s", err, out)
	}
}
