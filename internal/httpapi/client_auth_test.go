package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestClientTokensMatch(t *testing.T) {
	auth := NewClientAuthenticator([]ClientToken{{"refunds", "tok-refunds-0123456789"}, {"payouts", "tok-payouts-0123456789"}})
	for _, tc := range []struct {
		token, want string
		ok          bool
	}{
		{"tok-refunds-0123456789", "refunds", true},
		{"tok-payouts-0123456789", "payouts", true},
		{"tok-refunds-012345678", "", false},
		{"tok-refunds-0123456789 ", "", false},
		{"", "", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.token), func(t *testing.T) {
			got, ok := auth(tc.token)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestClientTokenNeverPrinted: logging or formatting a ClientToken shows
// its name, never its token.
func TestClientTokenNeverPrinted(t *testing.T) {
	c := ClientToken{Name: "refunds", Token: "tok-secret-0123456789"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "client", c, "list", []ClientToken{c})
	for _, s := range []string{buf.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprint([]ClientToken{c})} {
		if strings.Contains(s, "tok-secret") {
			t.Errorf("the token is printed: %s", s)
		}
	}
}
