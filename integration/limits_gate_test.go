package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestNoPaymentBeforeLimitsLoad: until the first limits document is in
// force, /readyz is not ready and POST /pay answers 503
// DEPENDENCY_UNAVAILABLE naming the limits source; once a valid document
// arrives, payments are served. Sources: a Nacos dataId never published, a
// missing file and an invalid file.
func TestNoPaymentBeforeLimitsLoad(t *testing.T) {
	nacosAddr := testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
	cases := []struct {
		name   string
		source string
		start  func(t *testing.T) (*server, func(doc string))
	}{
		{"nacos without a document", "nacos", func(t *testing.T) (*server, func(string)) {
			dataID := "gate-" + testutil.UniqueName("D")
			s := nacosServer(t, nacosAddr, dataID, "", "")
			return s, func(doc string) { nacosPublish(t, nacosAddr, dataID, doc) }
		}},
		{"missing file", "file", func(t *testing.T) (*server, func(string)) {
			path := filepath.Join(t.TempDir(), "absent.yaml")
			s := startServer(t, serverOptions{LimitsPath: path})
			return s, func(doc string) { mustWrite(t, path, doc) }
		}},
		{"invalid file", "file", func(t *testing.T) (*server, func(string)) {
			path := filepath.Join(t.TempDir(), "bad.yaml")
			mustWrite(t, path, "limits:\n  not a key: 5\n")
			s := startServer(t, serverOptions{LimitsPath: path})
			return s, func(doc string) { mustWrite(t, path, doc) }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, publish := tc.start(t)
			biz := testutil.UniqueName("GATE")
			if r := s.do(t, http.MethodGet, "/readyz", nil, nil); r.Status != 503 {
				t.Errorf("/readyz = %d before any limits, want 503", r.Status)
			}
			r := s.pay(t, payBody("gate-1", biz, "ALIPAY"))
			body := r.JSON(t)
			details, _ := body["details"].(map[string]any)
			if r.Status != 503 || body["code"] != "DEPENDENCY_UNAVAILABLE" || details["dependency"] != "limits" || details["source"] != tc.source {
				t.Fatalf("POST /pay before any limits = %d %v; want 503 DEPENDENCY_UNAVAILABLE with dependency limits, source %s", r.Status, body, tc.source)
			}
			publish(fmt.Sprintf("limits:\n  %s:ALIPAY: 5\n", biz))
			waitFor(t, "the limits to load", 10*time.Second, func() bool {
				return s.do(t, http.MethodGet, "/readyz", nil, nil).Status == 200
			})
			if r := s.pay(t, payBody("gate-2", biz, "ALIPAY")); r.Status != 200 {
				t.Fatalf("POST /pay after the load = %d %s", r.Status, r.Body)
			}
		})
	}
}
