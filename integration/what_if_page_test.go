package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestWhatIfPageInChromium: logged in with the admin token, a person
// follows the dashboard's "what if…" link, pastes a lower limit and sees,
// for the key, a chart of actual and proposed admissions and the merchants
// the proposal newly refuses; uploading the document as a file answers the
// same. Screenshot: integration/testdata/out/dashboard-what-if.png.
func TestWhatIfPageInChromium(t *testing.T) {
	token := "adm-" + testutil.UniqueName("TOK") + "-secret"
	biz := testutil.UniqueName("WHATIF")
	key := biz + ":ALIPAY"
	s := startServer(t, serverOptions{Limits: fmt.Sprintf("limits:\n  %s: {limit: 10, window: 1h}\n", key), Config: channelsConfig,
		Env: map[string]string{"PAYSERVER_ADMIN_TOKEN": token}})
	for i, merchant := range []string{"M-FIRST", "M-SECOND", "M-THIRD"} {
		body := payBody(fmt.Sprintf("whatif-%d", i), biz, "ALIPAY")
		body["merchantId"] = merchant
		s.pay(t, body) // all three admitted under 10 an hour
	}
	proposed := fmt.Sprintf("limits:\n  %s: {limit: 1, window: 1h}\n", key)

	// The decision log is written off the request path, at least every
	// second: wait until the API replays the three payments.
	admin := http.Header{"Authorization": {"Bearer " + token}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.do(t, http.MethodPost, "/limits/what-if", []byte(proposed), admin)
		var res struct {
			Keys []struct {
				Key     string `json:"key"`
				Offered int64  `json:"offered"`
			} `json:"keys"`
		}
		if r.Status == 200 && json.Unmarshal(r.Body, &res) == nil && len(res.Keys) == 1 && res.Keys[0].Offered == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decision log never held the three payments: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	b := startBrowser(t, 1280, 1000)
	b.navigate(s.base + "/dashboard")
	b.drainEvents()
	b.eval(`document.querySelector('#token').value = `+jsString(token)+`; document.querySelector('form.login button').click(); true`, nil)
	b.waitLoad()
	b.drainEvents()
	b.eval(`document.querySelector('#what-if-link').click(); true`, nil)
	b.waitLoad()
	var path string
	if b.eval("location.pathname", &path); path != "/dashboard/what-if" {
		t.Fatalf("the dashboard's link leads to %s:\n%s", path, b.text())
	}

	type seen struct {
		Chart     bool     `json:"chart"`
		Lines     int      `json:"lines"`
		Merchants []string `json:"merchants"`
		Problems  string   `json:"problems"`
	}
	read := func() seen {
		var v seen
		b.eval(`({chart: !!document.querySelector('svg.what-if-chart[data-key=`+jsString(key)+`]'),
			lines: document.querySelectorAll('svg.what-if-chart[data-key=`+jsString(key)+`] polyline').length,
			merchants: [...document.querySelectorAll('.key-result[data-key=`+jsString(key)+`] td.merchant')].map(e => e.textContent),
			problems: [...document.querySelectorAll('.problem')].map(e => e.textContent).join('; ')})`, &v)
		return v
	}
	check := func(how string) {
		t.Helper()
		v := read()
		if !v.Chart || v.Lines != 2 || len(v.Merchants) != 2 || !strings.Contains(strings.Join(v.Merchants, " "), "M-SECOND") ||
			!strings.Contains(strings.Join(v.Merchants, " "), "M-THIRD") {
			t.Errorf("%s: chart %v with %d lines, merchants newly refused %v (problems %q); want the chart and M-SECOND, M-THIRD:\n%.2000s",
				how, v.Chart, v.Lines, v.Merchants, v.Problems, b.text())
		}
	}

	b.drainEvents()
	b.eval(`document.querySelector('#document').value = `+jsString(proposed)+`; document.querySelector('#replay').click(); true`, nil)
	b.waitLoad()
	check("pasted")
	t.Logf("what if: %s", b.screenshot("dashboard-what-if.png"))

	file := filepath.Join(t.TempDir(), "proposed.yaml")
	if err := os.WriteFile(file, []byte(proposed), 0o600); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	b.do("DOM.getDocument", nil, &doc)
	var input struct {
		NodeID int `json:"nodeId"`
	}
	b.do("DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": "#file"}, &input)
	b.do("DOM.setFileInputFiles", map[string]any{"nodeId": input.NodeID, "files": []string{file}}, nil)
	b.drainEvents()
	b.eval(`document.querySelector('#document').value = ''; document.querySelector('#replay').click(); true`, nil)
	b.waitLoad()
	check("uploaded")

	// A document the server would refuse: the reason, on the page.
	b.drainEvents()
	b.eval(`document.querySelector('#document').value = 'limits:\n  bad key: 1\n'; document.querySelector('#replay').click(); true`, nil)
	b.waitLoad()
	if v := read(); v.Chart || !strings.HasPrefix(v.Problems, "document: ") {
		t.Errorf("a refused document: chart %v, problems %q; want the reason and no chart", v.Chart, v.Problems)
	}
}
