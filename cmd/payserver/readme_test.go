package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeMultiInstanceNamesItsSettings: README's paragraph on running
// several instances names every setting they need, the instance count too:
// the local share (each instance's part of every limit while Redis is
// unreachable) is 1/PAYSERVER_INSTANCE_COUNT, so left at 1 each instance
// would admit every limit in full.
func TestReadmeMultiInstanceNamesItsSettings(t *testing.T) {
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var para string
	for _, p := range strings.Split(string(doc), "\n\n") {
		if strings.Contains(p, "To run several") {
			para = p
		}
	}
	if para == "" {
		t.Fatal("README has no paragraph on running several instances (\"To run several\")")
	}
	for _, name := range []string{"PAYSERVER_REDIS_ADDR", "PAYSERVER_MYSQL_DSN", "PAYSERVER_INSTANCE_COUNT"} {
		if _, ok := envKeys[name]; !ok {
			t.Errorf("%s is not a variable payserver reads", name)
		}
		if !strings.Contains(para, "`"+name+"`") {
			t.Errorf("README's multi-instance paragraph does not name `%s`:\n%s", name, para)
		}
	}
}
