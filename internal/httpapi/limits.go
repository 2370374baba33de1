package httpapi

import (
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// LimitsView is what GET /limits shows.
type LimitsView interface {
	Config() *ratelimit.Config
	Status() configcenter.Status
	Degraded() bool
}

type windowJSON struct {
	Limit    int64  `json:"limit"`
	Window   string `json:"window"`
	WindowMs int64  `json:"windowMs"`
}

type limitJSON struct {
	Key       string       `json:"key"`
	BizType   string       `json:"bizType"`
	Channel   string       `json:"channel"`
	Unlimited bool         `json:"unlimited"`
	Closed    bool         `json:"closed"`
	Shadow    bool         `json:"shadow"`
	Windows   []windowJSON `json:"windows"`
	Rule      string       `json:"rule"`
}

func limitsJSON(cfg *ratelimit.Config) []limitJSON {
	out := []limitJSON{}
	if cfg == nil {
		return out
	}
	for k := range cfg.Rules {
		r := cfg.Rule(k)
		l := limitJSON{
			Key: k.String(), BizType: k.BizType, Channel: k.Channel,
			Unlimited: r.IsUnlimited(), Closed: r.IsClosed(), Shadow: r.Shadow,
			Windows: []windowJSON{}, Rule: configcenter.DescribeRule(r, true),
		}
		for _, w := range r.Windows {
			l.Windows = append(l.Windows, windowJSON{Limit: w.Limit, Window: configcenter.FormatWindow(w.Size), WindowMs: w.Size.Milliseconds()})
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (h *handler) getLimits(c *gin.Context) {
	cfg := h.opts.Limits.Config()
	st := h.opts.Limits.Status()
	body := gin.H{
		"loaded":   st.Loaded,
		"source":   st.Source,
		"name":     st.Name,
		"describe": st.Describe,
		"md5":      st.MD5,
		"loadedAt": timeOrNil(st.LoadedAt),
		"applied":  st.Applied,
		"refusals": st.Refusals,
		"lastRefusal": gin.H{
			"error":      st.LastRefusal,
			"at":         timeOrNil(st.LastRefusalAt),
			"superseded": st.LastRefusalSuperseded,
		},
		"limiterDegraded": h.opts.Limits.Degraded(),
		"missingKeyMeans": "unlimited",
		"limits":          limitsJSON(cfg),
	}
	if cfg != nil {
		body["defaultWindow"] = configcenter.FormatWindow(cfg.DefaultWindow)
		body["shadowAll"] = cfg.Shadow
		body["routes"] = routesJSON(cfg.Routes)
	}
	writeJSON(c, h.log, http.StatusOK, body)
}
