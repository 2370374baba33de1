package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
)

// formConsole is a console of one JSON route that reads its body and
// refuses it as invalid, on an engine of its own as the real console's.
type formConsole struct{ e *gin.Engine }

func (f formConsole) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.e.ServeHTTP(w, r) }
func (formConsole) Routes() []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodPost, Path: "/reports/echo"}}
}

// A console handler that refuses a body the server cut at MaxBodyBytes
// answers 413, as the API's own handlers do: the cut is marked on the
// request, which crosses into the console's engine, not on the server's
// gin context, which does not.
func TestConsoleRefusalOfACutBodyIs413(t *testing.T) {
	e := gin.New()
	log := slog.New(slog.DiscardHandler)
	e.POST("/reports/echo", func(c *gin.Context) {
		_, _ = io.ReadAll(c.Request.Body)
		httpapi.WriteError(c, log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "is not JSON"}), "")
	})
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: log, AdminToken: "tok", Console: formConsole{e}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"x":"` + strings.Repeat("a", int(httpapi.MaxBodyBytes)+10) + `"}`
	// A reader of unknown length: the request goes chunked, so the cap is
	// met while the handler reads, not at the Content-Length.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/reports/echo", io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "BODY_TOO_LARGE") {
		t.Fatalf("status %d, body %s; want 413 BODY_TOO_LARGE", resp.StatusCode, b)
	}
}
