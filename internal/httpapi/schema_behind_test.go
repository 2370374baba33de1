package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"payserver/internal/apperr"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/pay"
)

// downPay fails every call as the order store does when it cannot answer.
type downPay struct{ err error }

func (p downPay) Pay(context.Context, pay.PayRequest) (*pay.Order, error) { return nil, p.err }
func (p downPay) Get(context.Context, string) (*pay.Order, error)         { return nil, p.err }

// TestSchemaBehindSaysRunMigrate: while the database answers but its
// schema is behind, POST /pay and GET /pay answer 503
// DEPENDENCY_UNAVAILABLE with details.dependency "database" and a message
// that says the schema is behind and to run `payserver migrate`; with a
// current schema the message stays "unavailable".
func TestSchemaBehindSaysRunMigrate(t *testing.T) {
	storeDown := apperr.Wrap(nil, apperr.DependencyUnavailable, "the order database is unavailable").
		WithDetails(map[string]any{"dependency": "database"})
	for _, tt := range []struct {
		name, behind, want string
	}{
		{"schema behind", "behind (0 < 9)", "schema is behind this binary (schema behind (0 < 9)): run `payserver migrate`"},
		{"schema current", "", "the order database is unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := httpapi.New(httpapi.Options{Pay: downPay{storeDown}, Logger: slog.New(slog.DiscardHandler),
				SchemaBehind: func(context.Context) string { return tt.behind }})
			if err != nil {
				t.Fatal(err)
			}
			s := consoletest.ServeHandler(t, h)
			for _, a := range []consoletest.Answer{
				s.Post(t, "/pay", "", `{"requestId":"R-1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M1","amount":100,"currency":"CNY","subject":"x"}`),
				s.Get(t, "/pay/R-1", ""),
			} {
				var body struct {
					Code    string
					Message string
					Details map[string]any
				}
				if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
					t.Fatalf("%v: %s", err, a.Body)
				}
				if a.Status != http.StatusServiceUnavailable || body.Code != "DEPENDENCY_UNAVAILABLE" || body.Details["dependency"] != "database" ||
					!strings.Contains(body.Message, tt.want) {
					t.Errorf("got %d %s, want 503 DEPENDENCY_UNAVAILABLE, dependency database, message with %q", a.Status, a.Body, tt.want)
				}
			}
		})
	}
}
