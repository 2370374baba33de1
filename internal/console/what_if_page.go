package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/httpapi"
	"payserver/internal/whatif"
)

//go:embed templates/whatif.html
var whatIfFS embed.FS

// whatIfPagePath is the dashboard's what-if page: GET shows the form, POST
// (a form, multipart/form-data or application/x-www-form-urlencoded)
// answers it with the replay drawn.
const whatIfPagePath = "/dashboard/what-if"

// maxWhatIfPoints is the most points a what-if chart draws: a longer range
// is drawn in steps of several minutes, each at its average per minute.
const maxWhatIfPoints = 480

// whatIfPage serves whatIfPagePath.
type whatIfPage struct {
	opts httpapi.WhatIfOptions
	tmpl *template.Template
}

func newWhatIfPage(opts httpapi.WhatIfOptions) (*whatIfPage, error) {
	tmpl, err := template.ParseFS(whatIfFS, "templates/whatif.html")
	if err != nil {
		return nil, fmt.Errorf("console: what-if template: %w", err)
	}
	return &whatIfPage{opts: opts, tmpl: tmpl}, nil
}

// whatIfView is what templates/whatif.html shows.
type whatIfView struct {
	// CSRF is the session's CSRF token, sent back by the form; empty when
	// the page was not opened with a session cookie.
	CSRF string
	// Document, From and To are the form's fields as typed (From and To
	// default to the last 24 hours).
	Document, From, To string
	// Problems say why the question was not answered: the reasons the API
	// would give.
	Problems []string
	// Result is the answer; nil on the form alone or with Problems.
	Result *whatIfResultView
}

type whatIfResultView struct {
	From, To, ProposedVersion string
	Fidelity                  string
	// LowFidelity is true below whatif.FidelityFloor.
	LowFidelity bool
	Keys        []whatIfKeyView
}

type whatIfKeyView struct {
	whatif.KeyResult
	Chart whatIfChart
}

// whatIfChart is one key's actual and proposed admissions per minute, as
// two polylines over the whole range.
type whatIfChart struct {
	Width, Height, PlotLeft, PlotRight int
	// StepMinutes is the minutes each point stands for (their average per
	// minute), 1 for a range of at most maxWhatIfPoints minutes.
	StepMinutes      int
	Actual, Proposed string // polyline points
	YTicks, XTicks   []chartTick
	YZeroAt          string
}

// get shows the form, its range the last 24 hours.
func (p *whatIfPage) get(c *gin.Context) {
	now := p.opts.Now().UTC().Truncate(time.Second)
	p.render(c, http.StatusOK, whatIfView{
		From: now.Add(-24 * time.Hour).Format(time.RFC3339), To: now.Format(time.RFC3339),
	})
}

// post answers the form: the document uploaded (field file) or, without
// one, pasted (field document), replayed over from and to. A question the
// API refuses is answered with the form again, its status, and the API's
// reasons.
func (p *whatIfPage) post(c *gin.Context) {
	if reason := httpapi.CrossSiteProblem(c.Request); reason != "" {
		httpapi.WriteError(c, p.opts.Logger, apperr.New(apperr.Unauthorized, "the form must be sent from this server's own page (%s)", reason), "")
		return
	}
	if !isFormBody(c.GetHeader("Content-Type")) {
		httpapi.WriteError(c, p.opts.Logger, apperr.New(apperr.UnsupportedMediaType, "send the form as multipart/form-data or application/x-www-form-urlencoded").
			WithDetails(map[string]any{"accept": "multipart/form-data"}), "")
		return
	}
	view := whatIfView{Document: c.PostForm("document"), From: c.PostForm("from"), To: c.PostForm("to")}
	doc, err := uploadedDocument(c)
	if err != nil {
		p.answer(c, view, err)
		return
	}
	if doc == nil {
		doc = []byte(view.Document)
	} else {
		view.Document = string(doc)
	}
	if strings.TrimSpace(string(doc)) == "" {
		p.answer(c, view, apperr.Invalid(apperr.FieldError{Field: "document", Reason: "paste a limits document or choose its file"}))
		return
	}
	form := map[string]string{"from": view.From, "to": view.To}
	q, err := httpapi.ParseWhatIfRange(p.opts, func(name string) (string, bool) { return form[name], form[name] != "" })
	if err != nil {
		p.answer(c, view, err)
		return
	}
	view.From, view.To = q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339) // the defaults, when empty
	q.Document = doc
	res, err := p.opts.Service.WhatIf(c.Request.Context(), q)
	if err != nil {
		p.answer(c, view, err)
		return
	}
	view.Result = newWhatIfResultView(res)
	p.render(c, http.StatusOK, view)
}

// uploadedDocument returns the file of the form's field file, or nil when
// none was chosen.
func uploadedDocument(c *gin.Context) ([]byte, error) {
	fh, err := c.FormFile("file")
	if errors.Is(err, http.ErrMissingFile) || errors.Is(err, http.ErrNotMultipart) {
		return nil, nil
	}
	if err != nil {
		return nil, apperr.Invalid(apperr.FieldError{Field: "file", Reason: "could not be read: " + err.Error()})
	}
	if fh.Size == 0 {
		return nil, nil
	}
	f, err := fh.Open()
	if err != nil {
		return nil, apperr.Invalid(apperr.FieldError{Field: "file", Reason: "could not be read: " + err.Error()})
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, apperr.Invalid(apperr.FieldError{Field: "file", Reason: "could not be read: " + err.Error()})
	}
	return b, nil
}

// isFormBody reports whether a Content-Type is one an HTML form sends.
func isFormBody(header string) bool {
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && (mt == "multipart/form-data" || mt == "application/x-www-form-urlencoded")
}

// answer shows the form again with err's reasons, at err's status; an
// internal error is logged and said in general terms, as writeError does.
func (p *whatIfPage) answer(c *gin.Context, view whatIfView, err error) {
	e := httpapi.ErrorOf(c.Request, err)
	status := httpapi.StatusOf(e.Code)
	if status >= 500 {
		p.opts.Logger.Error("what-if page", "err", err)
	}
	view.Problems = problemLines(e)
	p.render(c, status, view)
}

// problemLines returns an error's reasons as the API gives them: each
// field's "field: reason", or the message.
func problemLines(e *apperr.Error) []string {
	fields, _ := e.Details["fields"].([]apperr.FieldError)
	if len(fields) == 0 {
		return []string{e.Message}
	}
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, f.Field+": "+f.Reason)
	}
	return out
}

func (p *whatIfPage) render(c *gin.Context, status int, view whatIfView) {
	view.CSRF = httpapi.SessionCSRF(c.Request)
	var buf bytes.Buffer
	if err := p.tmpl.Execute(&buf, view); err != nil {
		httpapi.WriteError(c, p.opts.Logger, fmt.Errorf("render what-if page: %w", err), "")
		return
	}
	httpapi.PageSecurityHeaders(c)
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

func newWhatIfResultView(res whatif.Result) *whatIfResultView {
	v := &whatIfResultView{
		From: formatStamp(res.From), To: formatStamp(res.To), ProposedVersion: res.ProposedVersion,
		Fidelity: strconv.FormatFloat(res.Fidelity, 'f', 4, 64), LowFidelity: res.Fidelity < whatif.FidelityFloor,
	}
	for _, k := range res.Keys {
		v.Keys = append(v.Keys, whatIfKeyView{KeyResult: k, Chart: newWhatIfChart(k.Minutes, res.From, res.To)})
	}
	return v
}

// newWhatIfChart draws minutes over [from, to): every step of the range is
// a point, at zero when it saw no traffic.
func newWhatIfChart(minutes []whatif.Minute, from, to time.Time) whatIfChart {
	ch := whatIfChart{Width: chartW, Height: chartH, PlotLeft: chartLeft, PlotRight: chartW - chartRight}
	from = from.UTC().Truncate(time.Minute)
	span := max(int(math.Ceil(to.Sub(from).Minutes())), 1)
	step := (span + maxWhatIfPoints - 1) / maxWhatIfPoints
	n := (span + step - 1) / step
	ch.StepMinutes = step
	actual, proposed := make([]int64, n), make([]int64, n)
	for _, m := range minutes {
		i := int(m.At.Sub(from)/time.Minute) / step
		if i < 0 || i >= n {
			continue
		}
		actual[i] += m.ActualAdmitted
		proposed[i] += m.ProposedAdmitted
	}
	perMinute := func(v int64) float64 { return float64(v) / float64(step) }
	var peak float64
	for i := range actual {
		peak = math.Max(peak, math.Max(perMinute(actual[i]), perMinute(proposed[i])))
	}
	stepY, top := countAxis(int64(math.Ceil(peak)))
	plotH := float64(chartH - chartTop - chartBottom)
	plotW := float64(chartW - chartLeft - chartRight)
	y := func(v float64) float64 { return chartTop + plotH - plotH*v/float64(top) }
	x := func(i int) float64 {
		if n == 1 {
			return chartLeft + plotW/2
		}
		return chartLeft + plotW*float64(i)/float64(n-1)
	}
	for v := int64(0); v <= top; v += stepY {
		ch.YTicks = append(ch.YTicks, chartTick{Y: svgNum(y(float64(v))), Label: strconv.FormatInt(v, 10)})
	}
	ch.YZeroAt = svgNum(y(0))
	points := func(counts []int64) string {
		var b strings.Builder
		for i, v := range counts {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(svgNum(x(i)) + "," + svgNum(y(perMinute(v))))
		}
		return b.String()
	}
	ch.Actual, ch.Proposed = points(actual), points(proposed)
	for _, t := range []struct {
		at     time.Time
		x      float64
		anchor string
	}{{from, chartLeft, "start"}, {to.UTC(), chartW - chartRight, "end"}} {
		ch.XTicks = append(ch.XTicks, chartTick{X: svgNum(t.x), Y: svgNum(chartH - 6), Label: t.at.Format("01-02 15:04 UTC"), Anchor: t.anchor})
	}
	return ch
}
