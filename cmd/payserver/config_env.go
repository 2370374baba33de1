package main

// envKeys maps every PAYSERVER_* variable payserver reads to its YAML key
// path. A setting without a variable is set in the settings file
// (docs/CONFIGURATION.md, "Settings file only"). An empty path marks the
// variable read before the decoding (PAYSERVER_CONFIG names the file); the
// keys of builtKeys are read through koanf like the others and built into
// Config outside the decoder. docs/CONFIGURATION.md lists the same names;
// TestEnvKeysDocumented keeps the two in step.
var envKeys = map[string]string{
	"PAYSERVER_CONFIG":                  "",
	"PAYSERVER_CHANNELS":                "channelCodes",
	"PAYSERVER_CLIENT_TOKENS":           "clientTokens",        // limits_api.go
	"PAYSERVER_GRPC_ADDR":               "grpcAddr",            // limits_api.go
	"PAYSERVER_PAY_TOKENS":              "payTokens",           // limits_api.go
	"PAYSERVER_GRPC_FAILURE_MODE_DENY":  "grpcFailureModeDeny", // limits_api.go
	"PAYSERVER_LIMIT_MAX_WAITERS":       "limitMaxWaiters",     // limits_api.go
	"PAYSERVER_HTTP_ADDR":               "httpAddr",
	"PAYSERVER_DATA_DIR":                "dataDir",
	"PAYSERVER_LIMITS_FILE":             "limitsFile",
	"PAYSERVER_MYSQL_DSN":               "mysqlDsn",
	"PAYSERVER_MYSQL_TLS":               "mysqlTls.enabled",
	"PAYSERVER_MYSQL_TLS_CA":            "mysqlTls.ca",
	"PAYSERVER_MYSQL_TLS_CERT":          "mysqlTls.cert",
	"PAYSERVER_MYSQL_TLS_KEY":           "mysqlTls.key",
	"PAYSERVER_AUTO_MIGRATE":            "autoMigrate",
	"PAYSERVER_REDIS_MODE":              "redisMode",
	"PAYSERVER_REDIS_ADDR":              "redisAddrs",
	"PAYSERVER_REDIS_USERNAME":          "redisUsername",
	"PAYSERVER_REDIS_PASSWORD":          "redisPassword",
	"PAYSERVER_REDIS_SENTINELS":         "redisSentinels",
	"PAYSERVER_REDIS_MASTER":            "redisMaster",
	"PAYSERVER_REDIS_SENTINEL_USERNAME": "redisSentinelUsername",
	"PAYSERVER_REDIS_SENTINEL_PASSWORD": "redisSentinelPassword",
	"PAYSERVER_REDIS_TLS":               "redisTls.enabled",
	"PAYSERVER_REDIS_TLS_CA":            "redisTls.ca",
	"PAYSERVER_REDIS_TLS_CERT":          "redisTls.cert",
	"PAYSERVER_REDIS_TLS_KEY":           "redisTls.key",
	"PAYSERVER_PPROF_ADDR":              "pprofAddr",
	"PAYSERVER_ADMIN_TOKEN":             "adminToken",
	"PAYSERVER_AUTH_MAX_FAILURES":       "authMaxFailures",
	"PAYSERVER_LOG_LEVEL":               "logLevel",
	"PAYSERVER_LOG_FORMAT":              "logFormat",
	"PAYSERVER_LIMITER_POLICY":          "limiter.policy",
	"PAYSERVER_LIMITER_TIMEOUT":         "limiter.timeout",
	"PAYSERVER_INSTANCE_COUNT":          "limiter.instanceCount",
	"PAYSERVER_NACOS_ADDR":              "nacos.addrs",
	"PAYSERVER_NACOS_NAMESPACE":         "nacos.namespace",
	"PAYSERVER_NACOS_GROUP":             "nacos.group",
	"PAYSERVER_NACOS_DATA_ID":           "nacos.dataId",
	"PAYSERVER_NACOS_USERNAME":          "nacos.username",
	"PAYSERVER_NACOS_PASSWORD":          "nacos.password",
	"PAYSERVER_CHANNEL_TIMEOUT":         "channelTimeout",
	"PAYSERVER_SHUTDOWN_TIMEOUT":        "shutdownTimeout",
	"PAYSERVER_ORDER_STALE_AFTER":       "orderStaleAfter",
	"PAYSERVER_LOST_ANSWER_GRACE":       "lostAnswerGrace",
	"PAYSERVER_CHANNEL_GATEWAY_URL":     "channelGatewayUrl",
	"PAYSERVER_CHANNEL_GATEWAY_SECRET":  "channelGatewaySecret",
	"PAYSERVER_DECISION_LOG_RETENTION":  "decisionLog.retention",
	"PAYSERVER_WHATIF_MAX_DECISIONS":    "decisionLog.whatIfMaxDecisions",
}

// envLists are the keys whose variable is a comma list.
var envLists = map[string]bool{"redisAddrs": true, "redisSentinels": true, "nacos.addrs": true, "channelCodes": true}

// builtKeys are the keys LoadConfig reads through koanf and builds into
// Config itself: the limits service's and payment routes' settings
// (loadAPIConfig, which checks them and words their refusals), and the
// list of channel codes that replaces the channels map's keys.
var builtKeys = []string{"channelCodes", "clientTokens", "grpcAddr", "payTokens", "grpcFailureModeDeny", "limitMaxWaiters"}
