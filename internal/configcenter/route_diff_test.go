package configcenter

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"payserver/internal/limits"
)

func TestRouteDiffInHistory(t *testing.T) {
	old := mustParse(t, "routes:\n  P: [A, B]\n  Q: [C]\nlimits:\n  P:A: 1\n")
	cur := mustParse(t, "routes:\n  P: [B, A]\n  R: [C]\nlimits:\n  P:A: 1\n")
	got := Diff(old, cur)
	want := []string{"route P: [A, B] -> [B, A]", "route Q: [C] -> absent", "route R: absent -> [C]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff = %q, want %q", got, want)
	}
}

// TestManagerCheckRefusesAndKeepsLastGood: a document the Check refuses
// (a route naming an unknown channel) is refused whole and recorded; the
// routes in force stay.
func TestManagerCheckRefusesAndKeepsLastGood(t *testing.T) {
	ctx := context.Background()
	a := &captureApplier{}
	check := func(d *limits.Document) error {
		return d.CheckRouteChannels(func(code string) bool { return code != "XPAY" })
	}
	h := &memHistory{}
	m, _ := NewManager(chanSource{}, a, ManagerOptions{Check: check, History: h})
	if d := m.Document(); d != nil || d.Route("P") != nil {
		t.Fatalf("before the first document: %+v, want nil, routing nothing", d)
	}
	if err := m.Apply(ctx, Document{Source: "nacos", Content: []byte("routes:\n  P: [A]\nlimits:\n  P:A: 1\n")}); err != nil {
		t.Fatal(err)
	}
	err := m.Apply(ctx, Document{Source: "nacos", Content: []byte("routes:\n  P: [XPAY, A]\nlimits:\n  P:A: 1\n")})
	if err == nil || !strings.Contains(err.Error(), "routes: P: unknown channel XPAY") {
		t.Fatalf("err = %v", err)
	}
	if got := m.Document().Route("P"); !reflect.DeepEqual(got, []string{"A"}) {
		t.Fatalf("routes in force %v, want the last good [A]", got)
	}
	if m.Document().Config != a.cfg {
		t.Fatal("the document in force does not hold the limits the applier has")
	}
	if n := len(h.changes); n != 2 || h.changes[1].Kind != KindRefused {
		t.Fatalf("history %+v", h.changes)
	}
}

type memHistory struct{ changes []Change }

func (h *memHistory) Record(_ context.Context, c Change) error {
	if c.MD5 == "" {
		return errors.New("no md5")
	}
	h.changes = append(h.changes, c)
	return nil
}
