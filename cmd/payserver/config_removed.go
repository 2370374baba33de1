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

// movedVariable is a variable payserver no longer reads whose setting is
// still made another way (Use). Set, it refuses the start, naming Use: a
// setting that once took effect must not be ignored (a Redis address, a
// fleet's share of each limit).
type movedVariable struct {
	Env, Use string
}

// movedVariables are the variables that went to make the environment's
// surface smaller: an alias, a second way to set one number, and the
// switches and tunings that exist for tests and benchmarks, which are set
// in the settings file. docs/CONFIGURATION.md, "Removed settings", lists
// the same; TestRemovedSettingsDocumented keeps the two in step.
var movedVariables = []movedVariable{
	{"PAYSERVER_REDIS_ADDRS", "PAYSERVER_REDIS_ADDR, which takes the same comma list"},
	{"PAYSERVER_LIMITER_LOCAL_SHARE", "PAYSERVER_INSTANCE_COUNT (each instance enforces 1/N of each limit), or limiter.localShare in the settings file"},
	{"PAYSERVER_DB_GROUP_COMMIT", "dbGroupCommit in the settings file"},
	{"PAYSERVER_DB_BATCH_READS", "dbBatchReads in the settings file"},
	{"PAYSERVER_DB_MAX_BATCH", "dbMaxBatch in the settings file"},
	{"PAYSERVER_LIMITER_NEAR_CACHE", "limiter.nearCache in the settings file"},
	{"PAYSERVER_LIMITER_COALESCE", "limiter.coalesce in the settings file"},
	{"PAYSERVER_LIMITER_MAX_BATCH", "limiter.maxBatch in the settings file"},
	{"PAYSERVER_RESOLVER_BACKOFF", "resolver.backoff in the settings file"},
	{"PAYSERVER_RESOLVER_MAX_BACKOFF", "resolver.maxBackoff in the settings file"},
	{"PAYSERVER_ROUTE_BREAKER_FAILURES", "routing.breakerFailures in the settings file"},
	{"PAYSERVER_ROUTE_BREAKER_COOLDOWN", "routing.breakerCooldown in the settings file"},
	{"PAYSERVER_ROUTE_BREAKER_PROBES", "routing.breakerProbes in the settings file"},
	{"PAYSERVER_STATS_FLUSH_INTERVAL", "stats.flushInterval in the settings file"},
	{"PAYSERVER_MYSQL_TLS_SERVER_NAME", "mysqlTls.serverName in the settings file"},
	{"PAYSERVER_REDIS_TLS_SERVER_NAME", "redisTls.serverName in the settings file"},
}

// refuseMovedVariables returns an error naming each moved variable set (not
// empty) in vars, with what to use instead.
func refuseMovedVariables(vars map[string]string) error {
	var msgs []string
	for _, m := range movedVariables {
		if vars[m.Env] != "" {
			msgs = append(msgs, fmt.Sprintf("%s is no longer read: use %s", m.Env, m.Use))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
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
