package stats_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/stats"
)

type fakeReader struct {
	buckets []stats.Bucket
	count   int
	got     stats.Query
}

func (r *fakeReader) Buckets(_ context.Context, q stats.Query) ([]stats.Bucket, error) {
	r.got = q
	return r.buckets, nil
}

func (r *fakeReader) EachBucket(_ context.Context, q stats.Query, fn func(stats.Bucket) error) error {
	r.got = q
	for _, b := range r.buckets {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// MoreBucketsThan counts the buckets, or count when it is set.
func (r *fakeReader) MoreBucketsThan(_ context.Context, q stats.Query, n int) (bool, error) {
	if r.count > 0 {
		return r.count > n, nil
	}
	return len(r.buckets) > n, nil
}

type fakeHistory []configcenter.Change

func (h fakeHistory) List(_ context.Context, from, to time.Time, limit int) ([]configcenter.Change, error) {
	var out []configcenter.Change
	for _, c := range h {
		if !c.At.Before(from) && c.At.Before(to) && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

type countingFlusher struct {
	n   int
	err error
}

func (f *countingFlusher) Flush(context.Context) error {
	f.n++
	return f.err
}

func sampleReport(t *testing.T) (stats.Report, *countingFlusher) {
	t.Helper()
	reader := &fakeReader{buckets: []stats.Bucket{
		{Start: t0, Key: key("PAY", "ALIPAY"), Rule: "20/1s", RulesSeen: 1,
			Counts: stats.Counts{Attempts: 3, Admitted: 2, Limited: 1, NearCacheRefusals: 1, PeakUtilization: 2.0 / 3}},
		{Start: t0, Key: key("SHOP", "ALIPAY"), Rule: "4/1m (shadow)", RulesSeen: 2,
			Counts: stats.Counts{Attempts: 5, Admitted: 5, ShadowLimited: 1, Released: 2, PeakUtilization: 1}},
		{Start: t0.Add(time.Hour), Key: key(stats.Other, "WECHAT"), Rule: "unlimited", RulesSeen: 1,
			Counts: stats.Counts{Released: 1}},
	}}
	history := fakeHistory{
		// Before the report: the document in force when it starts.
		{At: t0.Add(-time.Hour), MD5: "m1", Keys: []string{"PAY:ALIPAY: absent -> 10/1s"}},
		// An instance restarts with the same document: not a change.
		{At: t0.Add(5 * time.Minute), MD5: "m1", Keys: []string{"PAY:ALIPAY: absent -> 10/1s", "SHOP:ALIPAY: absent -> 4/1m (shadow)"}},
		{At: t0.Add(10 * time.Minute), MD5: "m2", Keys: []string{"PAY:ALIPAY: 10/1s -> 20/1s", "PAY:WECHAT: absent -> unlimited"}},
		// A second instance applies the same document.
		{At: t0.Add(10*time.Minute + time.Millisecond), MD5: "m2", Keys: []string{"PAY:ALIPAY: 10/1s -> 20/1s"}},
		// A third instance that missed nothing still reports the same diff once.
		{At: t0.Add(11 * time.Minute), MD5: "m3", Keys: []string{"PAY:ALIPAY: 10/1s -> 20/1s", "not a key entry"}},
		{At: t0.Add(2 * time.Hour), MD5: "m4", Keys: []string{"PAY:ALIPAY: 20/1s -> 30/1s"}}, // outside the buckets
	}
	flusher := &countingFlusher{}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: reader, History: history, Flusher: flusher})
	if err != nil {
		t.Fatal(err)
	}
	q := stats.Query{From: t0, To: t0.Add(2 * time.Hour), Granularity: stats.Hour, Format: stats.FormatJSON}
	rep, err := r.Report(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reader.got, q) {
		t.Fatalf("reader got %+v, want %+v", reader.got, q)
	}
	return rep, flusher
}

func TestReporter(t *testing.T) {
	rep, flusher := sampleReport(t)
	if flusher.n != 1 {
		t.Errorf("flushed %d times before the report, want 1", flusher.n)
	}
	if len(rep.Rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rep.Rows))
	}
	tests := []struct {
		name string
		got  stats.ReportRow
		want stats.ReportRow
	}{
		{"history marks the change once", rep.Rows[0], stats.ReportRow{BizType: "PAY", Channel: "ALIPAY", Bucket: t0,
			Attempts: 3, Admitted: 2, Limited: 1, NearCacheRefusals: 1, LimitedRate: 0.3333, PeakUtilization: 0.6667,
			Limit: "20/1s", LimitChanged: true, LimitChanges: []string{"10/1s -> 20/1s"}}},
		{"two rules seen is a change", rep.Rows[1], stats.ReportRow{BizType: "SHOP", Channel: "ALIPAY", Bucket: t0,
			Attempts: 5, Admitted: 5, ShadowLimited: 1, Released: 2, PeakUtilization: 1,
			Limit: "4/1m (shadow)", LimitChanged: true, LimitChanges: []string{}}},
		{"no attempts: rate 0", rep.Rows[2], stats.ReportRow{BizType: "other", Channel: "WECHAT", Bucket: t0.Add(time.Hour),
			Released: 1, Limit: "unlimited", LimitChanges: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := json.Marshal(tt.got)
			w, _ := json.Marshal(tt.want)
			if !bytes.Equal(g, w) {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
	t.Run("a failed flush fails the report", func(t *testing.T) {
		r, _ := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{}, Flusher: &countingFlusher{err: errors.New("db down")}})
		if _, err := r.Report(context.Background(), stats.Query{Granularity: stats.Minute}); err == nil {
			t.Fatal("got nil error")
		}
	})
}

func TestReportJSONShape(t *testing.T) {
	rep, _ := sampleReport(t)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["from"] != "2026-03-01T10:00:00Z" || m["to"] != "2026-03-01T12:00:00Z" || m["granularity"] != "hour" {
		t.Errorf("header fields: %s", b)
	}
	row := m["rows"].([]any)[0].(map[string]any)
	if len(row) != len(stats.Columns) {
		t.Errorf("row has %d fields, want the %d columns: %v", len(row), len(stats.Columns), row)
	}
	for _, c := range stats.Columns {
		if _, ok := row[c]; !ok {
			t.Errorf("JSON row lacks column %s", c)
		}
	}
	empty, _ := json.Marshal(stats.Report{Rows: []stats.ReportRow{}})
	if !strings.Contains(string(empty), `"rows":[]`) {
		t.Errorf("empty report: %s", empty)
	}
}

func TestWriteCSV(t *testing.T) {
	rep, _ := sampleReport(t)
	var buf bytes.Buffer
	if err := stats.WriteCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	want := `bizType,channel,bucket,attempts,admitted,limited,shadowLimited,degraded,released,nearCacheRefusals,limitedRate,peakUtilization,limit,limitChanged,limitChanges
PAY,ALIPAY,2026-03-01T10:00:00Z,3,2,1,0,0,0,1,0.3333,0.6667,20/1s,true,10/1s -> 20/1s
SHOP,ALIPAY,2026-03-01T10:00:00Z,5,5,0,1,0,2,0,0,1,4/1m (shadow),true,
other,WECHAT,2026-03-01T11:00:00Z,0,0,0,0,0,1,0,0,0,unlimited,false,
`
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	recs, err := csv.NewReader(strings.NewReader(buf.String())).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("not valid CSV with 4 records: %v %v", err, recs)
	}
	t.Run("values with commas and quotes are quoted", func(t *testing.T) {
		rep := stats.Report{Rows: []stats.ReportRow{{BizType: "A", Channel: "B", Bucket: t0, Limit: `1/1s, "odd"`, LimitChanges: []string{"a -> b", "b -> c"}}}}
		var buf bytes.Buffer
		if err := stats.WriteCSV(&buf, rep); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil || recs[1][12] != `1/1s, "odd"` || recs[1][14] != "a -> b; b -> c" {
			t.Fatalf("round trip: %v %q", err, recs)
		}
	})
}

func TestWriteTable(t *testing.T) {
	rep, _ := sampleReport(t)
	var buf bytes.Buffer
	if err := stats.WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"3 rows", "BUCKET", "PAY", "33.3", "yes (10/1s -> 20/1s)", "4/1m (shadow)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestReportKeepsEveryChangeInOrder loads 5 at start, then applies 5→6, 6→5, 5→6, 6→7 within one
// minute: the report shows all four, in order, forming a chain, while a
// second instance recording the same versions adds nothing.
func TestReportKeepsEveryChangeInOrder(t *testing.T) {
	k := "PAY:ALIPAY: "
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	history := fakeHistory{
		// Loads at start, no-op edits and refusals are not changes.
		{At: at(0), Kind: configcenter.KindLoad, MD5: "m5", Keys: []string{k + "absent -> 5/1s"}},
		{At: at(0).Add(time.Millisecond), Kind: configcenter.KindUnchanged, MD5: "m5b"},
		{At: at(0).Add(2 * time.Millisecond), Kind: configcenter.KindRefused, Refusal: "bad"},
		{At: at(1), MD5: "m6", Keys: []string{k + "5/1s -> 6/1s"}},
		{At: at(1).Add(time.Millisecond), MD5: "m6", Keys: []string{k + "5/1s -> 6/1s"}}, // second instance
		{At: at(2), MD5: "m5", Keys: []string{k + "6/1s -> 5/1s"}},
		{At: at(3), MD5: "m6", Keys: []string{k + "5/1s -> 6/1s"}},
		{At: at(4), MD5: "m7", Keys: []string{k + "6/1s -> 7/1s"}},
	}
	reader := &fakeReader{buckets: []stats.Bucket{{Start: t0, Key: key("PAY", "ALIPAY"), Rule: "7/1s", RulesSeen: 1}}}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: reader, History: history})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Report(context.Background(), stats.Query{From: t0, To: t0.Add(time.Minute), Granularity: stats.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rep.Rows))
	}
	got := strings.Join(rep.Rows[0].LimitChanges, "; ")
	want := "5/1s -> 6/1s; 6/1s -> 5/1s; 5/1s -> 6/1s; 6/1s -> 7/1s"
	if got != want {
		t.Errorf("limitChanges = %q, want %q", got, want)
	}
}

// TestReporterChanges: the changes of a key without traffic are listed
// beside those of a key with rows (Report's rows carry only the latter),
// filtered by bizType and channel, re-applications skipped.
func TestReporterChanges(t *testing.T) {
	history := fakeHistory{
		{At: t0.Add(-time.Hour), MD5: "m1", Keys: []string{"PAY:ALIPAY: absent -> 10/1s"}},
		{At: t0.Add(10 * time.Minute), MD5: "m2", Keys: []string{"PAY:ALIPAY: 10/1s -> 20/1s", "PAY:WECHAT: 5/1s -> 6/1s"}},
		{At: t0.Add(10*time.Minute + time.Millisecond), MD5: "m2", Keys: []string{"PAY:WECHAT: 5/1s -> 6/1s"}}, // another instance
		{At: t0.Add(70 * time.Minute), MD5: "m3", Keys: []string{"SHOP:WECHAT: 1/1s -> 2/1s"}},
		{At: t0.Add(2 * time.Hour), MD5: "m4", Keys: []string{"PAY:ALIPAY: 20/1s -> 30/1s"}}, // at the end: outside
	}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{}, History: history})
	if err != nil {
		t.Fatal(err)
	}
	format := func(cs []stats.KeyChange) string {
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(c.Bucket.Format("15:04") + " " + c.Key.String() + " " + strings.Join(c.Changes, ", ") + "; ")
		}
		return b.String()
	}
	tests := []struct {
		name             string
		bizType, channel string
		want             string
	}{
		{"every key", "", "", "10:00 PAY:ALIPAY 10/1s -> 20/1s; 10:00 PAY:WECHAT 5/1s -> 6/1s; 11:00 SHOP:WECHAT 1/1s -> 2/1s; "},
		{"bizType", "SHOP", "", "11:00 SHOP:WECHAT 1/1s -> 2/1s; "},
		{"channel", "", "WECHAT", "10:00 PAY:WECHAT 5/1s -> 6/1s; 11:00 SHOP:WECHAT 1/1s -> 2/1s; "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Changes(context.Background(), stats.Query{From: t0, To: t0.Add(2 * time.Hour), Granularity: stats.Hour,
				BizType: tt.bizType, Channel: tt.channel})
			if err != nil {
				t.Fatal(err)
			}
			if g := format(got); g != tt.want {
				t.Errorf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
	t.Run("none without a history", func(t *testing.T) {
		r, _ := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{}})
		if got, err := r.Changes(context.Background(), stats.Query{From: t0, To: t0.Add(time.Hour), Granularity: stats.Hour}); err != nil || len(got) != 0 {
			t.Errorf("got %v, %v; want none", got, err)
		}
	})
}
