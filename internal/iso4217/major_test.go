package iso4217

import (
	"math"
	"testing"
)

func TestMajorAndText(t *testing.T) {
	tests := []struct {
		name    string
		amount  int64
		code    string
		major   string
		majorOK bool
		text    string
	}{
		{"CNY limit", 500000000, "CNY", "5000000.00", true, "5,000,000.00 CNY"},
		{"CNY used", 1274570, "CNY", "12745.70", true, "12,745.70 CNY"},
		{"CNY one fen", 1, "CNY", "0.01", true, "0.01 CNY"},
		{"CNY zero", 0, "CNY", "0.00", true, "0.00 CNY"},
		{"CNY below a thousand", 99999, "CNY", "999.99", true, "999.99 CNY"},
		{"CNY a thousand", 100000, "CNY", "1000.00", true, "1,000.00 CNY"},
		{"CNY negative", -123456789, "CNY", "-1234567.89", true, "-1,234,567.89 CNY"},
		{"JPY million", 1000000, "JPY", "1000000", true, "1,000,000 JPY"},
		{"JPY small", 999, "JPY", "999", true, "999 JPY"},
		{"JPY zero", 0, "JPY", "0", true, "0 JPY"},
		{"BHD one and a half", 1500, "BHD", "1.500", true, "1.500 BHD"},
		{"BHD one fils", 1, "BHD", "0.001", true, "0.001 BHD"},
		{"BHD large", 1234567891, "BHD", "1234567.891", true, "1,234,567.891 BHD"},
		{"BHD negative fils", -5, "BHD", "-0.005", true, "-0.005 BHD"},
		{"largest", math.MaxInt64, "CNY", "92233720368547758.07", true, "92,233,720,368,547,758.07 CNY"},
		{"every currency", 500000000, "", "", false, "500000000 minor units"},
		{"unknown code", 1200, "XYZ", "", false, "1200 minor units of XYZ"},
		{"lower case", 1200, "cny", "", false, "1200 minor units of cny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			major, ok := Major(tt.amount, tt.code)
			if major != tt.major || ok != tt.majorOK {
				t.Errorf("Major(%d, %q) = %q, %v; want %q, %v", tt.amount, tt.code, major, ok, tt.major, tt.majorOK)
			}
			if got := Text(tt.amount, tt.code); got != tt.text {
				t.Errorf("Text(%d, %q) = %q, want %q", tt.amount, tt.code, got, tt.text)
			}
		})
	}
}
