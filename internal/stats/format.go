package stats

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"payserver/internal/apperr"
)

// Columns are the report's columns, in order: the CSV header and the JSON
// field names.
var Columns = []string{
	"bizType", "channel", "bucket", "attempts", "admitted", "limited", "shadowLimited",
	"degraded", "released", "nearCacheRefusals", "limitedRate", "peakUtilization",
	"limit", "limitChanged", "limitChanges",
}

// fields returns the row's values in Columns order, as text. limitChanges
// are joined with "; ".
func (r ReportRow) fields() []string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return []string{
		r.BizType, r.Channel, r.Bucket.UTC().Format(time.RFC3339), i(r.Attempts), i(r.Admitted), i(r.Limited),
		i(r.ShadowLimited), i(r.Degraded), i(r.Released), i(r.NearCacheRefusals), f(r.LimitedRate),
		f(r.PeakUtilization), r.Limit, strconv.FormatBool(r.LimitChanged), strings.Join(r.LimitChanges, "; "),
	}
}

// WriteCSV writes the report as CSV (RFC 4180): a header row of Columns,
// then one line per row, with the same values as the JSON form.
func WriteCSV(w io.Writer, rep Report) error {
	return WriteReport(NewCSVWriter(w), rep)
}

// WriteReport writes a report built whole through w.
func WriteReport(w ReportWriter, rep Report) error {
	if err := w.Head(rep); err != nil {
		return err
	}
	for _, r := range rep.Rows {
		if err := w.Row(r); err != nil {
			return err
		}
	}
	return w.End()
}

// NewCSVWriter returns a ReportWriter of WriteCSV's form, buffered: End
// writes what is left.
func NewCSVWriter(w io.Writer) ReportWriter { return &csvReport{w: csv.NewWriter(w)} }

type csvReport struct{ w *csv.Writer }

func (c *csvReport) Head(Report) error     { return c.w.Write(Columns) }
func (c *csvReport) Row(r ReportRow) error { return c.w.Write(r.fields()) }
func (c *csvReport) End() error {
	c.w.Flush()
	return c.w.Error()
}

// NewJSONWriter returns a ReportWriter of the JSON form of a Report, byte
// for byte what json.Marshal makes of it, buffered: End writes what is
// left.
func NewJSONWriter(w io.Writer) ReportWriter { return &jsonReport{w: bufio.NewWriter(w)} }

type jsonReport struct {
	w    *bufio.Writer
	rows int
}

func (j *jsonReport) Head(rep Report) error {
	head, err := json.Marshal(Report{From: rep.From, To: rep.To, Granularity: rep.Granularity, Rows: []ReportRow{}})
	if err != nil {
		return apperr.Wrap(err, apperr.Internal, "encode the report")
	}
	// head ends with the empty rows' "[]}": keep its "[".
	_, err = j.w.Write(head[:len(head)-2])
	return err
}

func (j *jsonReport) Row(r ReportRow) error {
	b, err := json.Marshal(r)
	if err != nil {
		return apperr.Wrap(err, apperr.Internal, "encode the report")
	}
	if j.rows++; j.rows > 1 {
		if err := j.w.WriteByte(','); err != nil {
			return err
		}
	}
	_, err = j.w.Write(b)
	return err
}

func (j *jsonReport) End() error {
	if _, err := j.w.WriteString("]}"); err != nil {
		return err
	}
	return j.w.Flush()
}

// WriteTable writes the report as an aligned text table for terminals, with
// a one-line summary first.
func WriteTable(w io.Writer, rep Report) error {
	if _, err := fmt.Fprintf(w, "channel limits from %s to %s by %s: %d rows\n\n",
		rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339), rep.Granularity, len(rep.Rows)); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := []string{"BUCKET", "BIZTYPE", "CHANNEL", "ATTEMPTS", "ADMITTED", "LIMITED", "SHADOW", "DEGRADED", "RELEASED", "NEARCACHE", "LIMITED%", "PEAK%", "LIMIT", "CHANGED", ""}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	pct := func(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) }
	for _, r := range rep.Rows {
		changed := ""
		if r.LimitChanged {
			changed = "yes"
			if len(r.LimitChanges) > 0 {
				changed += " (" + strings.Join(r.LimitChanges, "; ") + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n",
			r.Bucket.UTC().Format(time.RFC3339), r.BizType, r.Channel, r.Attempts, r.Admitted, r.Limited,
			r.ShadowLimited, r.Degraded, r.Released, r.NearCacheRefusals, pct(r.LimitedRate), pct(r.PeakUtilization),
			r.Limit, changed)
	}
	return tw.Flush()
}

// AmountColumns are the amounts report's CSV columns, in order: each amount
// in minor units, then in major units of the row's currency (empty for
// currency Other), named as in the JSON form.
var AmountColumns = []string{
	"bucket", "channel", "currency", "admitted", "admittedAmount", "admittedAmountMajor",
	"refused", "refusedAmount", "refusedAmountMajor",
}

// WriteAmountsCSV writes the amounts report as CSV (RFC 4180): a header row
// of AmountColumns, then one line per row.
func WriteAmountsCSV(w io.Writer, rep AmountReport) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(AmountColumns); err != nil {
		return err
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, r := range rep.Rows {
		line := []string{
			r.Start.UTC().Format(time.RFC3339), r.Channel, r.Currency,
			i(r.Admitted), i(r.AdmittedAmount), r.major(r.AdmittedAmount),
			i(r.Refused), i(r.RefusedAmount), r.major(r.RefusedAmount),
		}
		if err := cw.Write(line); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// MerchantColumns are the merchant report's CSV columns, in order, named as
// in the JSON form.
var MerchantColumns = []string{"bizType", "channel", "merchant", "bucket", "attempts", "admitted", "refused"}

// WriteMerchantsCSV writes the report grouped by merchant as CSV (RFC
// 4180): a header row of MerchantColumns, then one line per row.
func WriteMerchantsCSV(w io.Writer, rep MerchantReport) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(MerchantColumns); err != nil {
		return err
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, r := range rep.Rows {
		line := []string{r.BizType, r.Channel, r.Merchant, r.Bucket.UTC().Format(time.RFC3339), i(r.Attempts), i(r.Admitted), i(r.Refused)}
		if err := cw.Write(line); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
