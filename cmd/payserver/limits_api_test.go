package main

import (
	"strings"
	"testing"
)

func TestParseClientTokens(t *testing.T) {
	got, err := parseClientTokens(" refunds=0123456789abcdef , payouts.v2=fedcba9876543210x,", "admin-token-000000")
	if err != nil || len(got) != 2 || got[0].Name != "refunds" || got[1].Token != "fedcba9876543210x" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"no equals", "refunds", "want name=token"},
		{"bad name", "re funds=0123456789abcdef", "name"},
		{"reserved name", "pay=0123456789abcdef", "reserved"},
		{"short token", "refunds=short", "at least 16"},
		{"admin token", "refunds=admin-token-000000", "admin token"},
		{"duplicate name", "a=0123456789abcdef,a=0123456789abcdeX", "given twice"},
		{"shared token", "a=0123456789abcdef,b=0123456789abcdef", "another client's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseClientTokens(tc.in, "admin-token-000000")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "admin-token") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

func TestLoadAPIConfig(t *testing.T) {
	env := map[string]string{"PAYSERVER_LIMIT_MAX_WAITERS": "7", "PAYSERVER_GRPC_ADDR": "127.0.0.1:0"}
	c, err := loadAPIConfig(func(k string) string { return env[k] }, "")
	if err != nil || c.MaxWaiters != 7 || c.GRPCAddr != "127.0.0.1:0" || len(c.ClientTokens) != 0 {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{{"PAYSERVER_LIMIT_MAX_WAITERS": "0"}, {"PAYSERVER_GRPC_ADDR": "nohostport"}} {
		if _, err := loadAPIConfig(func(k string) string { return bad[k] }, ""); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestClientTokenEntryErrorsNeverEchoSecrets: an entry written the wrong
// way round, or with a wrong separator, has its token where the name
// belongs; the refusal must not print it.
func TestClientTokenEntryErrorsNeverEchoSecrets(t *testing.T) {
	const secret = "Zr8fQ2vK9xLm4TnB7wYc"
	// The last: the wrong way round, with a name long enough to pass as a
	// token. Names are at most 15 characters and tokens at least 16, so no
	// swapped entry parses.
	for _, in := range []string{secret + "=refunds", "refunds:" + secret + "+/aa=", secret + "=refunds-service-eu"} {
		_, err := parseClientTokens(in, "admin-token-000000")
		if err == nil || strings.Contains(err.Error(), "Zr8f") {
			t.Errorf("parseClientTokens(%q) = %v; want a refusal that does not echo the token", in, err)
		}
	}
}
