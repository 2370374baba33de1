package api

import (
	"context"
	"os"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestChannelGatewaySpecIsValid: api/channel-gateway.yaml is a valid
// OpenAPI document.
func TestChannelGatewaySpecIsValid(t *testing.T) {
	data, err := os.ReadFile("channel-gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("channel-gateway.yaml: %v", err)
	}
}
