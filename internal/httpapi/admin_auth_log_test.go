package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/httpapi"

	"payserver/internal/testutil"
)

// TestFailedAdminAuthIsLogged: a failed admin authentication is logged at
// warn with the route and client, never the token, and a flood of them is
// rate-limited.
func TestFailedAdminAuthIsLogged(t *testing.T) {
	gin.SetMode(gin.TestMode)
	var logs testutil.LogBuffer
	h, err := httpapi.New(httpapi.Options{Pay: nopPay{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)), AdminToken: "s3cret-admin",
		Admin: []func(*gin.RouterGroup){func(g *gin.RouterGroup) { g.GET("/probe", func(c *gin.Context) { c.Status(204) }) }}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const attempts = 200
	for i := 0; i < attempts; i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/probe", nil)
		req.Header.Set("Authorization", "Bearer wrong-token-xyz")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	l := logs.String()
	n := strings.Count(l, "admin authentication failed")
	if n == 0 {
		t.Fatalf("no failed admin authentication was logged:\n%s", l)
	}
	if n >= attempts/2 {
		t.Errorf("%d of %d failures logged; want them rate-limited", n, attempts)
	}
	if strings.Contains(l, "wrong-token-xyz") || strings.Contains(l, "s3cret-admin") {
		t.Errorf("a token was logged:\n%s", l)
	}
	if !strings.Contains(l, "route=/probe") || !strings.Contains(l, "level=WARN") {
		t.Errorf("the log line lacks the route or the warn level:\n%s", l)
	}
}
