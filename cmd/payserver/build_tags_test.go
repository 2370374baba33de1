package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMakeBuildLeavesOutMsgpack: the build flags every make target uses
// (the Makefile's GOFLAGS) leave gin's msgpack codec (github.com/ugorji/go,
// about an eighth of a cold build) out of payserver, which never speaks
// msgpack.
func TestMakeBuildLeavesOutMsgpack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export GOFLAGS \+= (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no GOFLAGS for its targets (want a line export GOFLAGS += -tags=nomsgpack)")
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(string(m[1])))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/ugorji/go") {
			t.Errorf("payserver built with the Makefile's GOFLAGS %q still compiles %s", m[1], pkg)
		}
	}
}
