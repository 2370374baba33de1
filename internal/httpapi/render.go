package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
)

// WriteJSON encodes v completely before it writes the status, so an answer
// that cannot be encoded becomes a 500 INTERNAL JSON error instead of a 200
// with an empty or cut body (gin's c.JSON writes the status first).
func WriteJSON(c *gin.Context, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(c, log, fmt.Errorf("encode the answer: %w", err), "")
		return
	}
	c.Data(status, "application/json; charset=utf-8", b)
}
