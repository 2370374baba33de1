package testutil

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// PropertyChecks sets rapid's number of sequences (the flag rapid.checks,
// which pgregory.net/rapid registers in the test binary) from
// PAYSERVER_PROPERTY_CHECKS, else def, unless -rapid.checks was given.
func PropertyChecks(t *testing.T, def int) {
	t.Helper()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if set {
		return
	}
	n := strconv.Itoa(def)
	if v := os.Getenv("PAYSERVER_PROPERTY_CHECKS"); v != "" {
		n = v
	}
	if _, err := strconv.Atoi(n); err != nil {
		t.Fatalf("PAYSERVER_PROPERTY_CHECKS=%q: %v", n, err)
	}
	if err := flag.Set("rapid.checks", n); err != nil {
		t.Fatal(err)
	}
}
