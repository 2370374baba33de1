package console

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/httpapi"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// AdmissionRows reads the orders a channel's limiter admitted in a time
// range. *repo.Orders implements it.
type AdmissionRows interface {
	Admissions(ctx context.Context, channel string, from, to time.Time, limit int) ([]*pay.Order, error)
}

// Bounds of GET /reports/admissions.
const (
	maxAdmissionRange  = 24 * time.Hour
	defaultAdmissions  = 1000
	maxAdmissionsLimit = 10000
)

// admissionJSONRow is one admitted payment in GET /reports/admissions.
type admissionJSONRow struct {
	RequestID     string   `json:"requestId"`
	OrderNo       string   `json:"orderNo"`
	BizType       string   `json:"bizType"`
	Amount        int64    `json:"amount"`
	Currency      string   `json:"currency"`
	Status        string   `json:"status"`
	AdmittedAt    string   `json:"admittedAt"`
	AdmittedAtUs  int64    `json:"admittedAtUs"`
	WindowKeys    []string `json:"windowKeys"`
	LimitsVersion string   `json:"limitsVersion,omitempty"`
}

type admissionsJSON struct {
	Channel    string             `json:"channel"`
	From       string             `json:"from"`
	To         string             `json:"to"`
	Admissions []admissionJSONRow `json:"admissions"`
	// Truncated is true when more admissions than limit fall in the range.
	Truncated bool `json:"truncated"`
}

// getAdmissions answers GET /reports/admissions: the payments a channel's
// limiter admitted in [from, to) by the limiter's own time, with the window
// keys and limits version of each, the earliest first.
func (r *reports) getAdmissions(c *gin.Context) {
	q := c.Request.URL.Query()
	from, to, bad := stats.ParseRange(q, r.opts.Now())
	ch := c.Query("channel")
	if reason := ratelimit.CodeProblem(ch); reason != "" {
		bad = append(bad, apperr.FieldError{Field: "channel", Reason: reason})
	}
	limit := defaultAdmissions
	if v, given := q["limit"]; given {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxAdmissionsLimit {
			bad = append(bad, apperr.FieldError{Field: "limit", Reason: "must be an integer from 1 to " + strconv.Itoa(maxAdmissionsLimit)})
		}
		limit = n
	}
	if len(bad) == 0 && to.Sub(from) > maxAdmissionRange {
		bad = append(bad, apperr.FieldError{Field: "to", Reason: "must be at most 24 hours after from"})
	}
	if len(bad) > 0 {
		sort.Slice(bad, func(i, j int) bool { return bad[i].Field < bad[j].Field })
		httpapi.WriteError(c, r.log, apperr.Invalid(bad...), "")
		return
	}
	orders, err := r.opts.Admissions.Admissions(c.Request.Context(), ch, from, to, limit+1)
	if err != nil {
		httpapi.WriteError(c, r.log, httpapi.DatabaseDown(err, "the orders database is unavailable"), "")
		return
	}
	out := admissionsJSON{Channel: ch, From: from.Format(time.RFC3339), To: to.Format(time.RFC3339),
		Admissions: make([]admissionJSONRow, 0, len(orders))}
	if len(orders) > limit {
		orders, out.Truncated = orders[:limit], true
	}
	for _, o := range orders {
		keys := o.Admission.Keys
		if keys == nil {
			keys = []string{}
		}
		out.Admissions = append(out.Admissions, admissionJSONRow{
			RequestID: o.RequestID, OrderNo: o.OrderNo, BizType: o.BizType, Amount: o.Amount, Currency: o.Currency,
			Status: string(o.Status), AdmittedAt: httpapi.FormatTime(o.Admission.At), AdmittedAtUs: o.Admission.At.UnixMicro(),
			WindowKeys: keys, LimitsVersion: o.Admission.LimitsVersion,
		})
	}
	c.Header("Cache-Control", "no-store")
	httpapi.WriteJSON(c, r.log, http.StatusOK, out)
}
