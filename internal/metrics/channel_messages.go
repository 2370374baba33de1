package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/channel/gateway"
)

// ChannelMessages counts the channel gateway messages payserver refused
// (answers to its calls, and notifications):
// payserver_channel_messages_refused_total{channel,reason}, reason one of
// gateway.Reasons. The channels given to NewChannelMessages start at 0 for
// every reason; any other channel is counted as "other".
type ChannelMessages struct {
	known   map[string]bool
	refused *prometheus.CounterVec
}

// NewChannelMessages registers payserver_channel_messages_refused_total,
// with a series at 0 for each of channels and reasons.
func (m *Metrics) NewChannelMessages(channels []string) *ChannelMessages {
	c := &ChannelMessages{known: map[string]bool{}, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_channel_messages_refused_total",
		Help: "Channel gateway messages refused (answers and notifications), by channel and reason: signature, stale, replayed or unknown_key. A refused message changes nothing.",
	}, []string{"channel", "reason"})}
	for _, ch := range channels {
		c.known[ch] = true
		for _, r := range gateway.Reasons {
			c.refused.WithLabelValues(ch, string(r))
		}
	}
	m.Registry.MustRegister(c.refused)
	return c
}

// Refused counts one message of channel refused for reason.
func (c *ChannelMessages) Refused(channel string, reason gateway.Reason) {
	if !c.known[channel] {
		channel = Other
	}
	c.refused.WithLabelValues(channel, string(reason)).Inc()
}
