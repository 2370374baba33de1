package httpapi

import (
	"encoding/json"
	"slices"
	"strconv"

	"payserver/internal/apperr"
)

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Code      apperr.Code    `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}

// appendJSON appends b as JSON to dst, byte for byte what json.Marshal(b)
// gives (TestErrorBodyMatchesEncodingJSON), without reflection for the
// values a refusal's details hold: strings, integers and booleans. Other
// values go through json.Marshal one by one.
func (b errorBody) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"code":`...)
	dst = appendJSONString(dst, string(b.Code))
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, b.Message)
	dst = append(dst, `,"requestId":`...)
	dst = appendJSONString(dst, b.RequestID)
	dst = append(dst, `,"details":`...)
	if b.Details == nil {
		return append(dst, "null}"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range b.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json's order for string keys
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		switch v := b.Details[k].(type) {
		case string:
			dst = appendJSONString(dst, v)
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		case int:
			dst = strconv.AppendInt(dst, int64(v), 10)
		case bool:
			dst = strconv.AppendBool(dst, v)
		default:
			j, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			dst = append(dst, j...)
		}
	}
	return append(dst, "}}"...), nil
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it.
// Text of printable ASCII that encoding/json leaves as it is (no quote,
// backslash, <, > or &) is copied between quotes; anything else goes
// through json.Marshal, so escapes, invalid UTF-8 and U+2028/U+2029 come
// out exactly as encoding/json writes them.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(dst, j...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
