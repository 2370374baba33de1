package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
)

// TestReadyz: a check that is not ready takes the instance out (503, named
// in missing); a degraded one is shown with its text and keeps it ready.
func TestReadyz(t *testing.T) {
	ok := httpapi.Check{Name: "database", Check: httpapi.Required(func(context.Context) error { return nil })}
	down := httpapi.Check{Name: "redis", Check: httpapi.Required(func(context.Context) error { return errors.New("connection refused") })}
	degraded := httpapi.Check{Name: "redis", Check: func(context.Context) httpapi.Readiness {
		return httpapi.Readiness{Text: "degraded (deciding in process)"}
	}}
	bare := httpapi.Check{Name: "schema", Check: func(context.Context) httpapi.Readiness { return httpapi.Readiness{NotReady: true} }}
	tests := []struct {
		name       string
		checks     []httpapi.Check
		wantStatus int
		wantBody   map[string]any
	}{
		{"all ok", []httpapi.Check{ok}, 200,
			map[string]any{"status": "ready", "missing": []any{}, "checks": map[string]any{"database": "ok"}}},
		{"one down", []httpapi.Check{ok, down}, 503,
			map[string]any{"status": "not ready", "missing": []any{"redis"}, "checks": map[string]any{"database": "ok", "redis": "connection refused"}}},
		{"degraded is ready", []httpapi.Check{ok, degraded}, 200,
			map[string]any{"status": "ready", "missing": []any{}, "checks": map[string]any{"database": "ok", "redis": "degraded (deciding in process)"}}},
		{"not ready without a text", []httpapi.Check{bare}, 503,
			map[string]any{"status": "not ready", "missing": []any{"schema"}, "checks": map[string]any{"schema": "not ready"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), Ready: tt.checks})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != tt.wantStatus || !reflect.DeepEqual(got, tt.wantBody) {
				t.Errorf("got %d %v, want %d %v", rec.Code, got, tt.wantStatus, tt.wantBody)
			}
		})
	}
}
