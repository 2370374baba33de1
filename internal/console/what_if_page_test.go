package console_test

import (
	"bytes"
	"context"
	"html"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/whatif"
)

// multipartForm encodes fields, and file (when not empty) as the field
// file, as a browser sends the what-if form.
func multipartForm(t *testing.T, fields map[string]string, file string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if file != "" {
		f, err := w.CreateFormFile("file", "proposed.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, file); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

// TestWhatIfPage: GET /dashboard/what-if is a form with the last 24 hours
// filled in; posting a pasted or uploaded document draws the replay (the
// counts, an SVG of actual and proposed admissions per minute, the
// merchants newly refused); a refused document or a range over the cap
// shows the API's reason at the API's status, never a 500.
func TestWhatIfPage(t *testing.T) {
	svc, _ := consoletest.WhatIfFixture(t)
	route := func(maxDecisions int64) *consoletest.LoginServer {
		return consoletest.NewLoginServer(t, consoletest.LoginToken, consoletest.MustWhatIfRoute(t, httpapi.WhatIfOptions{
			Service: svc, MaxDecisions: maxDecisions, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now },
		}))
	}
	s := route(10)
	bearer := map[string]string{"Authorization": "Bearer " + consoletest.LoginToken}
	post := func(s *consoletest.LoginServer, fields map[string]string, file string, header map[string]string) consoletest.Answer {
		t.Helper()
		body, ct := multipartForm(t, fields, file)
		h := map[string]string{"Content-Type": ct, "Sec-Fetch-Site": "same-origin"}
		for k, v := range header {
			h[k] = v
		}
		return s.Send(t, http.MethodPost, "/dashboard/what-if", body, h)
	}
	const lower = "limits:\n  ONLINE_PAY:ALIPAY: 1\n"

	page := s.Send(t, http.MethodGet, "/dashboard/what-if", "", bearer)
	if page.Status != 200 || !strings.Contains(page.Body, `enctype="multipart/form-data"`) ||
		!strings.Contains(page.Body, `value="`+consoletest.Now.Add(-24*time.Hour).UTC().Format(time.RFC3339)+`"`) ||
		!strings.Contains(page.Body, `value="`+consoletest.Now.UTC().Format(time.RFC3339)+`"`) {
		t.Fatalf("the form: %d\n%s", page.Status, page.Body)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q, want the dashboard's", csp)
	}

	for name, a := range map[string]consoletest.Answer{
		"pasted":   post(s, map[string]string{"document": lower}, "", bearer),
		"uploaded": post(s, map[string]string{"document": "this text is not used"}, lower, bearer),
	} {
		t.Run(name, func(t *testing.T) {
			if a.Status != 200 {
				t.Fatalf("%d\n%s", a.Status, a.Body)
			}
			chart := regexp.MustCompile(`(?s)<svg class="what-if-chart" data-key="ONLINE_PAY:ALIPAY".*?</svg>`).FindString(a.Body)
			if !strings.Contains(chart, `<polyline class="actual"`) || !strings.Contains(chart, `<polyline class="proposed"`) {
				t.Errorf("no chart of actual and proposed admissions:\n%s", a.Body)
			}
			for _, want := range []string{
				`<td class="key merchant">M2</td><td class="num">1</td>`, // newly refused
				`<td class="num">3</td><td class="num">2</td><td class="num">1</td><td class="num">1</td><td class="num">2</td><td class="num newly-refused">1</td><td class="num">0</td>`,
				"fidelity 1.0000",
			} {
				if !strings.Contains(a.Body, want) {
					t.Errorf("the page lacks %q:\n%s", want, a.Body)
				}
			}
			if strings.Contains(a.Body, "Below 0.99") {
				t.Error("a fidelity of 1 carries the warning")
			}
		})
	}

	t.Run("refused document", func(t *testing.T) {
		const bad = "limits:\n  ONLINE_PAY:ALIPAY: 1\nunknownField: 3\n"
		_, perr := limits.Parse([]byte(bad))
		if perr == nil {
			t.Fatal("limits.Parse takes the document the test means the server to refuse")
		}
		a := post(s, map[string]string{"document": bad}, "", bearer)
		if a.Status != 400 || !strings.Contains(a.Body, html.EscapeString("document: "+perr.Error())) || !strings.Contains(a.Body, "unknownField: 3\n</textarea>") {
			t.Errorf("%d, want 400 with the reason %q and the document kept:\n%s", a.Status, perr, a.Body)
		}
	})
	t.Run("no document", func(t *testing.T) {
		if a := post(s, map[string]string{"document": " "}, "", bearer); a.Status != 400 || !strings.Contains(a.Body, "document: paste a limits document or choose its file") {
			t.Errorf("%d, want 400 asking for a document:\n%s", a.Status, a.Body)
		}
	})
	t.Run("bad time", func(t *testing.T) {
		if a := post(s, map[string]string{"document": lower, "from": "yesterday"}, "", bearer); a.Status != 400 || !strings.Contains(a.Body, "from: must be an RFC 3339 time") {
			t.Errorf("%d, want 400 naming from:\n%s", a.Status, a.Body)
		}
	})
	t.Run("over the cap", func(t *testing.T) {
		a := post(route(2), map[string]string{"document": lower}, "", bearer)
		if a.Status != 400 || !strings.Contains(a.Body, "PAYSERVER_WHATIF_MAX_DECISIONS (2)") || !strings.Contains(a.Body, "payserver what-if") {
			t.Errorf("%d, want 400 naming the cap and the CLI:\n%s", a.Status, a.Body)
		}
	})

	t.Run("a body over the cap, sent without its length", func(t *testing.T) {
		// Chunked, the body is cut while the page reads it: the page's
		// answer is the size's 413, not the 400 of a form it could not
		// read.
		body, ct := multipartForm(t, map[string]string{"document": lower + "# " + strings.Repeat("x", int(httpapi.MaxBodyBytes)) + "\n"}, "")
		req, err := http.NewRequest(http.MethodPost, s.URL+"/dashboard/what-if", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": ct, "Sec-Fetch-Site": "same-origin", "Authorization": "Bearer " + consoletest.LoginToken} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "the request body is over") {
			t.Errorf("%d, want 413 saying the body is over the cap:\n%.300s", resp.StatusCode, b)
		}
	})

	t.Run("session", func(t *testing.T) {
		// A browser without a session is asked to log in, and comes back.
		a := s.Send(t, http.MethodGet, "/dashboard/what-if", "", map[string]string{"Accept": "text/html"})
		if a.Status != 401 || !strings.Contains(a.Body, `name="next" value="/dashboard/what-if"`) {
			t.Errorf("no session: %d, want the login form returning to the page:\n%s", a.Status, a.Body)
		}
		body, h := consoletest.Form(url.Values{"token": {consoletest.LoginToken}, "next": {"/dashboard/what-if"}}, nil)
		if a := s.Send(t, http.MethodPost, "/dashboard/login", body, h); a.Status != 303 || a.Header.Get("Location") != "/dashboard/what-if" {
			t.Errorf("login: %d to %q, want 303 to /dashboard/what-if", a.Status, a.Header.Get("Location"))
		}
		cookie := s.Login(t)
		sessionPage := s.Send(t, http.MethodGet, "/dashboard/what-if", "", map[string]string{"Cookie": cookie})
		m := regexp.MustCompile(`<input type="hidden" name="csrf" value="([^"]+)">\s*<label>Paste`).FindStringSubmatch(sessionPage.Body)
		if m == nil {
			t.Fatalf("the form carries no CSRF token:\n%s", sessionPage.Body)
		}
		for _, c := range []struct {
			name   string
			fields map[string]string
			header map[string]string
			want   int
		}{
			{"without the CSRF token", map[string]string{"document": lower}, nil, 401},
			{"with another CSRF token", map[string]string{"document": lower, "csrf": "forged"}, nil, 401},
			{"from another site", map[string]string{"document": lower, "csrf": m[1]}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 401},
			{"with the CSRF token", map[string]string{"document": lower, "csrf": m[1]}, nil, 200},
		} {
			h := map[string]string{"Cookie": cookie}
			for k, v := range c.header {
				h[k] = v
			}
			if a := post(s, c.fields, "", h); a.Status != c.want {
				t.Errorf("%s: %d, want %d\n%.300s", c.name, a.Status, c.want, a.Body)
			}
		}
	})
}

// lowFidelity answers every question with a fidelity below the floor.
type lowFidelity struct{}

func (lowFidelity) WhatIf(_ context.Context, q whatif.Query) (whatif.Result, error) {
	return whatif.Result{From: q.From, To: q.To, ProposedVersion: "v", Fidelity: 0.95}, nil
}

// TestWhatIfPageWarnsBelowTheFloor: below 0.99 the page says the figures
// must be read with care, as the CLI does.
func TestWhatIfPageWarnsBelowTheFloor(t *testing.T) {
	s := consoletest.NewLoginServer(t, consoletest.LoginToken, consoletest.MustWhatIfRoute(t, httpapi.WhatIfOptions{
		Service: lowFidelity{}, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now },
	}))
	body, ct := multipartForm(t, map[string]string{"document": "limits: {}\n"}, "")
	a := s.Send(t, http.MethodPost, "/dashboard/what-if", body, map[string]string{"Content-Type": ct, "Authorization": "Bearer " + consoletest.LoginToken})
	if a.Status != 200 || !strings.Contains(a.Body, `<p id="fidelity" class="warn">fidelity 0.9500`) || !strings.Contains(a.Body, "Below 0.99") {
		t.Errorf("%d, want the fidelity 0.9500 with its warning:\n%s", a.Status, a.Body)
	}
}
