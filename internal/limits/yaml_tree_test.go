package limits

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestRepeatedKeyNamesBothLines: a key written twice is refused with both
// lines. yaml.v3's own error for it was a type error, which Parse reported
// as "its top level must be a map".
func TestRepeatedKeyNamesBothLines(t *testing.T) {
	_, err := Parse([]byte("limits:\n  PAY:ALIPAY: 1\n  PAY:ALIPAY: 2\n"))
	if err == nil || !strings.Contains(err.Error(), `line 3: key "PAY:ALIPAY" is repeated (first at line 2)`) {
		t.Fatalf("err = %v, want the repeated key and both lines", err)
	}
}

// TestAliasesRepeatARule: a rule written once under an anchor serves two
// keys, and a document whose aliases expand without bound is refused.
func TestAliasesRepeatARule(t *testing.T) {
	doc, err := Parse([]byte("limits:\n  PAY:ALIPAY: &std [{limit: 5, window: 1s}]\n  PAY:WECHAT: *std\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Config.Rules) != 2 {
		t.Fatalf("%d rules, want 2", len(doc.Config.Rules))
	}
	// 10,000 keys sharing one anchored rule of four windows (a review
	// found a budget of one value per byte refusing it).
	var many strings.Builder
	many.WriteString("limits:\n  P0:C: &w [{limit: 5, window: 1s}, {limit: 50, window: 1m}, {amount: 100, window: 1h}, {limit: 900, calendar: day}]\n")
	for i := 1; i < 10000; i++ {
		fmt.Fprintf(&many, "  P%d:C: *w\n", i)
	}
	if doc, err := Parse([]byte(many.String())); err != nil || len(doc.Config.Rules) != 10000 {
		t.Fatalf("10,000 aliased keys: %v", err)
	}
	var b strings.Builder
	b.WriteString("x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("limits:\n  PAY:ALIPAY: 1\n")
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "aliases expand to too many") {
		t.Fatalf("err = %v, want the expansion refused", err)
	}
}

// manyKeys is a document of n keys with two windows each.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString("limits:\n")
	for i := range n {
		fmt.Fprintf(&b, "  BIZ%05d:ALIPAY: [{limit: 100, window: 1s}, {limit: 1000, calendar: day}]\n", i)
	}
	return []byte(b.String())
}

// BenchmarkParse reads documents of 1,000 and 10,000 keys: the time per
// key stays flat (yaml.v3's decoding into a map grew with the square of
// the keys: 670 ms at 10,000).
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := manyKeys(n)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}

// TestYAMLTreeAgreesWithYAMLUnmarshal: the linear reader gives what
// yaml.v3's own Unmarshal into a map gave, on documents with every kind of
// value the parsers meet, merge keys, aliases and non-string keys.
func TestYAMLTreeAgreesWithYAMLUnmarshal(t *testing.T) {
	docs := []string{
		"limits:\n  PAY:ALIPAY: 1\n  PAY:WECHAT: -1\n",
		"window: 1s\nzone: Asia/Shanghai\nshadow: true\nlimits:\n  PAY:ALIPAY: [{limit: 5, window: 1s}, {amount: 1.5e3, calendar: day, cutoff: \"23:00\"}]\n",
		"limits:\n  PAY:ALIPAY: [&w {limit: 5, window: 1s}]\n  PAY:WECHAT: [{<<: *w, limit: 10}]\n",
		"base: &b {window: 1m}\nmore: &m {currency: CNY}\nlimits:\n  P:C: [{<<: [*b, *m], amount: 100}]\n",
		"limits:\n  P:C: {limit: 3, reserve: {1: 5, true: 2, ~: 1}}\n",
		"schedules:\n  - {key: \"P:C\", from: 2026-01-01T00:00:00Z, to: 2026-01-02, limits: 0}\nlimits:\n  P:C: 9223372036854775807\n",
		"limits:\n  P:C: {limit: 0x10, window: .5}\n  Q:C: null\n  R:C: ~\n",
		"# only a comment\nlimits: {\"P:C\": 1}\n",
		"limits:\n  P:C: 1\n---\nlimits:\n  Q:C: 2\n",
		"1: a\nlimits:\n  P:C: !!str 5\n",
	}
	for _, doc := range docs {
		want := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("yaml.Unmarshal(%q): %v", doc, err)
		}
		got, err := yamlRoot([]byte(doc))
		if err != nil {
			t.Fatalf("yamlRoot(%q): %v", doc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("document %q:\n got %#v\nwant %#v (yaml.Unmarshal)", doc, got, want)
		}
	}
}

// TestMergeKeysStillParse: a document written with a merge key reads as
// it did (refused by the first linear reader).
func TestMergeKeysStillParse(t *testing.T) {
	doc, err := Parse([]byte("limits:\n  PAY:ALIPAY: [&w {limit: 5, window: 1s}]\n  PAY:WECHAT: [{<<: *w, limit: 10}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Config.Rules) != 2 {
		t.Fatalf("%d rules, want 2", len(doc.Config.Rules))
	}
}
