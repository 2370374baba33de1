package main

import (
	"context"

	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
)

// This file holds the readiness checks that need more than a ping: Redis
// under the limiter's policy.

// redisReadiness is the readiness check of Redis under the limiter's
// policy. Under deny, a Redis that fails refuses every payment, so the
// instance is not ready. Under local (decisions in process) and allow
// (admissions without limits) it serves without Redis: degraded, not
// not-ready, since Redis is shared and every instance leaving the load
// balancer at once would defeat the fallback.
func redisReadiness(ping func(ctx context.Context) error, policy ratelimit.Policy) func(ctx context.Context) httpapi.Readiness {
	return func(ctx context.Context) httpapi.Readiness {
		err := ping(ctx)
		switch {
		case err == nil:
			return httpapi.Readiness{}
		case policy == ratelimit.PolicyLocal:
			return httpapi.Readiness{Text: "degraded (deciding in process): " + err.Error()}
		case policy == ratelimit.PolicyAllow:
			return httpapi.Readiness{Text: "degraded (admitting without limits): " + err.Error()}
		default:
			return httpapi.Readiness{NotReady: true, Text: err.Error()}
		}
	}
}
