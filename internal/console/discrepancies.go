package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/httpapi"
	"payserver/internal/iso4217"
	"payserver/internal/pay"
)

// discrepanciesListed is how many discrepancies the dashboard lists, and
// the most GET /reports/discrepancies answers.
const (
	discrepanciesListed = 20
	discrepanciesMax    = 1000
)

// discrepancyRow is one row of GET /reports/discrepancies: the order and what
// its channel said against it.
type discrepancyRow struct {
	RequestID   string                  `json:"requestId"`
	OrderNo     string                  `json:"orderNo"`
	BizType     string                  `json:"bizType"`
	Channel     string                  `json:"channel"`
	Status      string                  `json:"status"`
	FailureCode string                  `json:"failureCode,omitempty"`
	Amount      int64                   `json:"amount"`
	AmountMajor string                  `json:"amountMajor,omitempty"`
	Currency    string                  `json:"currency"`
	Discrepancy httpapi.DiscrepancyJSON `json:"discrepancy"`
}

func discrepancyRowOf(o *pay.Order) discrepancyRow {
	major, _ := iso4217.Major(o.Amount, o.Currency)
	return discrepancyRow{RequestID: o.RequestID, OrderNo: o.OrderNo, BizType: o.BizType, Channel: o.Channel,
		Status: string(o.Status), FailureCode: o.FailureCode, Amount: o.Amount, AmountMajor: major, Currency: o.Currency,
		Discrepancy: *httpapi.DiscrepancyOf(o.Discrepancy)}
}

// getDiscrepancies answers GET /reports/discrepancies: the newest orders a
// channel contradicted once they were final, ?limit of them (default 100).
func (r *reports) getDiscrepancies(c *gin.Context) {
	limit := 100
	if v, given := c.GetQuery("limit"); given {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > discrepanciesMax {
			httpapi.WriteError(c, r.log, apperr.Invalid(apperr.FieldError{Field: "limit", Reason: "must be a whole number from 1 to " + strconv.Itoa(discrepanciesMax)}), "")
			return
		}
		limit = n
	}
	list, err := r.opts.Discrepancies(c.Request.Context(), limit)
	if err != nil {
		httpapi.WriteError(c, r.log, httpapi.DatabaseDown(err, "the orders database is unavailable"), "")
		return
	}
	rows := make([]discrepancyRow, 0, len(list))
	for _, o := range list {
		if o.Discrepancy != nil {
			rows = append(rows, discrepancyRowOf(o))
		}
	}
	c.Header("Cache-Control", "no-store")
	httpapi.WriteJSON(c, r.log, http.StatusOK, gin.H{"discrepancies": rows})
}

// discrepancyLine is one listed discrepancy, for people.
type discrepancyLine struct {
	RequestID, Order, Reported, Amount, Ago string
}

// discrepancyLines reads the newest discrepancies for the dashboard; nil
// and why when they cannot be read.
func (d *dashboard) discrepancyLines(ctx context.Context, now time.Time) ([]discrepancyLine, string) {
	list, err := d.r.opts.Discrepancies(ctx, discrepanciesListed)
	if err != nil {
		d.r.log.Warn("dashboard: could not list the discrepancies", "err", err)
		return nil, "The orders database did not answer; the discrepancies are not listed."
	}
	out := make([]discrepancyLine, 0, len(list))
	for _, o := range list {
		x := o.Discrepancy
		if x == nil {
			continue
		}
		state := string(pay.StateOf(o))
		out = append(out, discrepancyLine{
			RequestID: o.RequestID,
			Order:     state + " on " + o.Channel,
			Reported:  x.Reported + " by " + x.Channel,
			Amount:    iso4217.Text(o.Amount, o.Currency),
			Ago:       max(now.Sub(x.At), 0).Round(time.Second).String(),
		})
	}
	return out, ""
}
