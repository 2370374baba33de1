// Command codec measures the JSON work of one POST /pay with the standard
// library against the two faster codecs that gin can be built with
// (goccy/go-json, tag go_json; bytedance/sonic, tag sonic), side by side in
// one run: what adopting one of them would buy (docs/decisions/0008).
//
//	cd bench/codec && go run . -benchtime 1s
//
// It is a module of its own (go.mod here), so the codecs are not
// dependencies of payserver. Each line is testing.Benchmark of one
// operation on the payload a benchmark POST /pay carries or answers:
//
//   - decode: the first step of pay.DecodePayRequest, a json.Unmarshal of
//     the body into map[string]json.RawMessage (the strict checks and field
//     parsing after it are payserver's own code, no codec's);
//   - DecodePayRequest: the whole of it, with the standard library, for
//     scale;
//   - encode answer: the 200 answer (httpapi's orderJSON, copied here);
//   - encode 429: the REQUEST_LIMITED body (httpapi's errorBody, copied).
package main

import (
	stdjson "encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"

	"payserver/internal/pay"
)

var body = []byte(`{"requestId":"r1763935000-roomy-c64-1-12345","bizType":"ROOMY","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}`)

// orderJSON and errorBody have the shapes of internal/httpapi's answers.
type orderJSON struct {
	OrderNo          string `json:"orderNo"`
	RequestID        string `json:"requestId"`
	BizType          string `json:"bizType"`
	Channel          string `json:"channel"`
	MerchantID       string `json:"merchantId"`
	Amount           int64  `json:"amount"`
	Currency         string `json:"currency"`
	CurrencyExponent *int   `json:"currencyExponent,omitempty"`
	Subject          string `json:"subject,omitempty"`
	Status           string `json:"status"`
	ChannelTradeNo   string `json:"channelTradeNo"`
	FailureCode      string `json:"failureCode,omitempty"`
	FailureMessage   string `json:"failureMessage,omitempty"`
	CreatedAt        string `json:"createdAt"`
	UpdatedAt        string `json:"updatedAt"`
}

type errorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}

func answer() orderJSON {
	two := 2
	return orderJSON{OrderNo: "PS20261123221500a1b2c3d4e5f6", RequestID: "r1763935000-roomy-c64-1-12345", BizType: "ROOMY",
		Channel: "ALIPAY", MerchantID: "M1", Amount: 1999, Currency: "CNY", CurrencyExponent: &two, Status: "SUCCEEDED",
		ChannelTradeNo: "SIM-ALIPAY-PS20261123221500a1b2c3d4e5f6", CreatedAt: "2026-11-23T22:15:00.123456Z", UpdatedAt: "2026-11-23T22:15:00.124000Z"}
}

func limited() errorBody {
	return errorBody{Code: "REQUEST_LIMITED", Message: "channel ALIPAY is at its limit for FULL", RequestID: "r1763935000-full-c64-1-12345",
		Details: map[string]any{"bizType": "FULL", "channel": "ALIPAY", "limit": int64(1), "retryAfterMs": int64(3599000), "windowMs": int64(3600000)}}
}

type codec struct {
	name      string
	unmarshal func([]byte, any) error
	marshal   func(any) ([]byte, error)
}

func main() {
	benchtime := flag.Duration("benchtime", time.Second, "time per measurement")
	rounds := flag.Int("rounds", 3, "interleaved rounds; the table shows each line's median")
	flag.Parse()
	testing.Init()
	_ = flag.Set("test.benchtime", benchtime.String())

	codecs := []codec{
		{"encoding/json", stdjson.Unmarshal, stdjson.Marshal},
		{"goccy/go-json", gojson.Unmarshal, gojson.Marshal},
		{"bytedance/sonic", sonic.Unmarshal, sonic.Marshal},
	}
	type op struct {
		name string
		run  func(c codec) error
	}
	ops := []op{
		{"decode body into map[string]RawMessage", func(c codec) error {
			var raw map[string]stdjson.RawMessage
			return c.unmarshal(body, &raw)
		}},
		{"encode 200 answer", func(c codec) error { _, err := c.marshal(answer()); return err }},
		{"encode 429 body", func(c codec) error { _, err := c.marshal(limited()); return err }},
	}
	ns := map[string][]float64{}
	allocs := map[string]int64{}
	measure := func(key string, f func() error) {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "codec: %s: %v\n", key, err)
			os.Exit(1)
		}
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = f()
			}
		})
		ns[key] = append(ns[key], float64(r.NsPerOp()))
		allocs[key] = r.AllocsPerOp()
	}
	for round := 0; round < *rounds; round++ {
		measure("DecodePayRequest (encoding/json), whole", func() error { _, err := pay.DecodePayRequest(body); return err })
		for _, o := range ops {
			for _, c := range codecs {
				measure(o.name+" | "+c.name, func() error { return o.run(c) })
			}
		}
	}
	median := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j] < s[i] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		return s[len(s)/2]
	}
	fmt.Printf("codec: %s %s/%s, GOMAXPROCS %d, %d rounds of %v, medians\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *rounds, *benchtime)
	whole := median(ns["DecodePayRequest (encoding/json), whole"])
	fmt.Printf("  %-60s %9.0f ns/op %4d allocs/op\n", "DecodePayRequest (encoding/json), whole", whole, allocs["DecodePayRequest (encoding/json), whole"])
	for _, o := range ops {
		std := median(ns[o.name+" | encoding/json"])
		for _, c := range codecs {
			k := o.name + " | " + c.name
			fmt.Printf("  %-60s %9.0f ns/op %4d allocs/op\n", k, median(ns[k]), allocs[k])
		}
		for _, c := range codecs[1:] {
			fmt.Printf("RATIO %s: encoding/json / %s = %.2f (time per op; > 1: %s faster)\n", o.name, c.name, std/median(ns[o.name+" | "+c.name]), c.name)
		}
	}
}
