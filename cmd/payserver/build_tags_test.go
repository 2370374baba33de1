package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestOneSetOfBuildFlags: make and the commands the docs give build with
// the same flags (none), so that `make run`, `go run ./cmd/payserver` and
// `go test` reuse one build cache instead of each recompiling the others'
// work; and `make run` runs the built binary, not `go run`, whose exit
// status on Ctrl-C is 1 although payserver stopped cleanly.
func TestOneSetOfBuildFlags(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^.*(GOFLAGS|-tags[= ]).*$`).Find(mk); m != nil && !strings.HasPrefix(strings.TrimSpace(string(m)), "#") {
		t.Errorf("the Makefile sets build flags the docs' go commands do not: %s", m)
	}
	run := regexp.MustCompile(`(?m)^run:\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if run == nil {
		t.Fatal("the Makefile has no run target")
	}
	if strings.Contains(string(run[1]), " run ") {
		t.Errorf("make run uses go run:\n%s", run[1])
	}
	for _, doc := range []string{"../../README.md", "../../docs/OPERATIONS.md", "../../docs/CONFIGURATION.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range regexp.MustCompile(`go (run|build|test) [^\n`+"`"+`]*`).FindAll(b, -1) {
			if strings.Contains(string(cmd), "-tags") {
				t.Errorf("%s: %q builds with other flags than make", doc, cmd)
			}
		}
	}
}
