package main

import (
	"fmt"
	"strings"
)

// removedSetting is a setting payserver once read and no longer does.
type removedSetting struct {
	Env, YAML string
	// Why says why it went and what holds instead.
	Why string
}

// removedSettings are the settings taken out, with why. LoadConfig refuses
// their YAML keys, naming the key and why (a settings file is reviewed on
// purpose: the key is deleted once). Their variables are reported as
// unknown, and Run's warning says why they went: as for any unknown
// variable, the start goes on, since an environment may outlive the
// binary it was written for. docs/CONFIGURATION.md, "Removed settings",
// lists the same; TestRemovedSettingsDocumented keeps the two in step.
var removedSettings = []removedSetting{
	{Env: "PAYSERVER_LIMITS_DEFAULT_POLICY", YAML: "limiter.unconfigured",
		Why: "no payment is served before the first limits document, whatever it said (fail-safe start: 503 DEPENDENCY_UNAVAILABLE, /readyz not ready); it was already ignored"},
	{Env: "PAYSERVER_DB_IN_FLIGHT", YAML: "dbInFlight",
		Why: "one batched claim INSERT and one outcome UPDATE are in flight per instance; more, measured end to end on durable MariaDB, gave no more payments/s for smaller batches and more CPU (docs/decisions/0005-one-batch-in-flight.md)"},
	{Env: "PAYSERVER_LIMITER_IN_FLIGHT", YAML: "limiter.inFlight",
		Why: "one coalesced limiter call of a key is in flight at a time; more, measured end to end, gave no faster checks and no more payments/s for smaller batches (docs/decisions/0005-one-batch-in-flight.md)"},
}

// removedEnv returns why the variable name was removed, if it was.
func removedEnv(name string) (string, bool) {
	for _, r := range removedSettings {
		if r.Env == name {
			return r.Why, true
		}
	}
	return "", false
}

// refuseRemovedKeys returns an error naming each removed key set in the
// file, with why it was removed; has reports whether a key path is set.
func refuseRemovedKeys(has func(key string) bool) error {
	var msgs []string
	for _, r := range removedSettings {
		if has(r.YAML) {
			msgs = append(msgs, fmt.Sprintf("%s was removed: %s; delete it", r.YAML, r.Why))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
