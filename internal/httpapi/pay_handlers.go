package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/pay"
)

// orderJSON is an order as the API shows it.
type orderJSON struct {
	OrderNo    string `json:"orderNo"`
	RequestID  string `json:"requestId"`
	BizType    string `json:"bizType"`
	Channel    string `json:"channel"`
	MerchantID string `json:"merchantId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	// CurrencyExponent is the ISO 4217 minor-unit exponent of Currency;
	// nil for an order stored before currencies were checked.
	CurrencyExponent *int   `json:"currencyExponent,omitempty"`
	Subject          string `json:"subject,omitempty"`
	Status           string `json:"status"`
	ChannelTradeNo   string `json:"channelTradeNo"`
	FailureCode      string `json:"failureCode,omitempty"`
	FailureMessage   string `json:"failureMessage,omitempty"`
	CreatedAt        string `json:"createdAt"`
	UpdatedAt        string `json:"updatedAt"`
	// RoutedFrom is present for a routed payment (no channel in the
	// request): the candidates skipped before Channel, possibly none.
	RoutedFrom *[]pay.RouteSkip `json:"routedFrom,omitempty"`
	// ResolvedBy (query, notify or close) and ResolvedAt are present for
	// an order whose unknown outcome was resolved with its channel.
	ResolvedBy string `json:"resolvedBy,omitempty"`
	ResolvedAt string `json:"resolvedAt,omitempty"`
	// Admission is the limiter's record of the payment's slot, when one
	// was recorded.
	Admission *admissionJSON `json:"admission,omitempty"`
	// Discrepancy is present when a channel's word contradicted the order
	// once it was final.
	Discrepancy *DiscrepancyJSON `json:"discrepancy,omitempty"`
}

// DiscrepancyJSON is pay.Discrepancy as the API shows it.
type DiscrepancyJSON struct {
	Channel  string `json:"channel"`
	Reported string `json:"reported"`
	TradeNo  string `json:"tradeNo,omitempty"`
	At       string `json:"at"`
}

// admissionJSON is pay.Admission as the API shows it.
type admissionJSON struct {
	AdmittedAt    string   `json:"admittedAt"`
	AdmittedAtUs  int64    `json:"admittedAtUs"`
	WindowKeys    []string `json:"windowKeys"`
	LimitsVersion string   `json:"limitsVersion,omitempty"`
}

func toJSON(o *pay.Order) orderJSON {
	var exponent *int
	if e, ok := pay.CurrencyExponent(o.Currency); ok {
		exponent = &e
	}
	var routedFrom *[]pay.RouteSkip
	if o.RoutedFrom != nil {
		routedFrom = &o.RoutedFrom
	}
	return orderJSON{
		RoutedFrom:       routedFrom,
		CurrencyExponent: exponent,
		OrderNo:          o.OrderNo, RequestID: o.RequestID, BizType: o.BizType, Channel: o.Channel,
		MerchantID: o.MerchantID, Amount: o.Amount, Currency: o.Currency, Subject: o.Subject,
		Status: string(o.Status), ChannelTradeNo: o.ChannelTradeNo,
		FailureCode: o.FailureCode, FailureMessage: o.FailureMessage,
		CreatedAt:  o.CreatedAt.UTC().Format(time.RFC3339Nano),
		UpdatedAt:  o.UpdatedAt.UTC().Format(time.RFC3339Nano),
		ResolvedBy: o.ResolvedBy, ResolvedAt: FormatTime(o.ResolvedAt),
		Admission:   admissionOf(o.Admission),
		Discrepancy: DiscrepancyOf(o.Discrepancy),
	}
}

func DiscrepancyOf(d *pay.Discrepancy) *DiscrepancyJSON {
	if d == nil {
		return nil
	}
	return &DiscrepancyJSON{Channel: d.Channel, Reported: d.Reported, TradeNo: d.TradeNo, At: FormatTime(d.At)}
}

func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func admissionOf(a pay.Admission) *admissionJSON {
	if a.At.IsZero() {
		return nil
	}
	keys := a.Keys
	if keys == nil {
		keys = []string{}
	}
	return &admissionJSON{AdmittedAt: FormatTime(a.At), AdmittedAtUs: a.At.UnixMicro(), WindowKeys: keys, LimitsVersion: a.LimitsVersion}
}

func (h *handler) postPay(c *gin.Context) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		reason := "could not be read in time or was cut short"
		if errors.As(err, &tooBig) {
			reason = fmt.Sprintf("must be at most %d bytes", MaxBodyBytes)
		}
		WriteError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: reason}), "")
		return
	}
	req, err := pay.DecodePayRequest(body)
	if err != nil {
		WriteError(c, h.log, err, pay.PeekRequestID(body))
		return
	}
	o, err := h.opts.Pay.Pay(c.Request.Context(), req)
	if err != nil {
		WriteError(c, h.log, h.explainDatabase(c.Request.Context(), err), req.RequestID)
		return
	}
	WriteJSON(c, h.log, http.StatusOK, toJSON(o))
}

func (h *handler) getPay(c *gin.Context) {
	id := c.Param("requestId")
	o, err := h.opts.Pay.Get(c.Request.Context(), id)
	if err != nil {
		if !pay.ValidRequestID(id) {
			id = ""
		}
		WriteError(c, h.log, h.explainDatabase(c.Request.Context(), err), id)
		return
	}
	WriteJSON(c, h.log, http.StatusOK, toJSON(o))
}
