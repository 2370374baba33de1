#!/usr/bin/env bash
# services.sh — install (if missing) and run the real backing services that the
# payserver tests use, on loopback only, with all state outside the work tree.
#
# Usage:
#   scripts/services.sh start   [SERVICE|all]...   (default all)
#   scripts/services.sh stop    [SERVICE|all]...   (default all)
#   scripts/services.sh restart [SERVICE|all]...
#   scripts/services.sh kill    [SERVICE|all]...   (SIGKILL: crash injection)
#   SERVICE: redis mariadb nacos cluster sentinel redis-tls mariadb-tls failover-cluster mariadb-durable
#   scripts/services.sh status
#   scripts/services.sh env        # prints `export VAR=value` lines: eval "$(scripts/services.sh env)"
#
#   A single Redis Cluster node can be addressed as cluster-node:PORT
#   (e.g. `stop cluster-node:17002`, `kill cluster-node:17002`, `start cluster-node:17002`),
#   for failover tests; likewise one Sentinel-managed server or sentinel as sentinel-node:PORT,
#   and one node of the failover cluster as failover-node:PORT.
#   nacos-cluster (not part of `all`) is a three-node r-nacos raft cluster; one node is
#   nacos-cluster-node:N (N = 1..3), e.g. `kill nacos-cluster-node:2`, `start nacos-cluster-node:2`.
#
# Services (all bound to 127.0.0.1 only):
#   redis    redis-server standalone   127.0.0.1:16379  (no persistence, protected-mode yes)
#   mariadb  mariadbd                  127.0.0.1:13306  (db `payserver`, user payserver/payserver,
#                                      ALL on payserver.* and `payserver\_%`.*; socket in state dir)
#   nacos    r-nacos (rnacos 0.8.8)    HTTP 127.0.0.1:18848, gRPC 127.0.0.1:19848 (= HTTP+1000, what
#                                      the Nacos SDKs assume), console 127.0.0.1:18849
#   nacos-cluster r-nacos raft x3      HTTP 127.0.0.1:18861..18863, gRPC 19861..19863, console
#                                      18871..18873 (see the nacos cluster section)
#   cluster  Redis Cluster             127.0.0.1:17001..17003 (3 masters). CLUSTER_REPLICAS=1 gives
#                                      17001..17006, 3 masters + 1 replica each. If the running cluster
#                                      has a different shape than asked for, it is wiped and re-created.
#   sentinel Redis Sentinel            data 127.0.0.1:16400 (first master), 16401 (replica); sentinels
#                                      127.0.0.1:16410..16412 (password payserver-sentinel), master
#                                      name payserver-master, quorum 2
#   redis-tls TLS-only Redis           127.0.0.1:16480 (port 0), client certs required, ACL user
#                                      payserver/payserver-tls, default user off; CA in $STATE/tls
#   mariadb-tls second MariaDB         127.0.0.1:13307 with TLS on; user payserver REQUIRE SSL
#   failover-cluster  a second, separate Redis Cluster 127.0.0.1:17101..17106 (3 masters + 1 replica
#                                      each, state in <state>/failover-cluster), for the test that kills a
#                                      master (TestRedisClusterFailover). Not part of `all`; its own lock,
#                                      so it can start while `start all` is busy.
#   mariadb-durable  a third MariaDB 127.0.0.1:13308, durable (innodb_flush_log_at_trx_commit=1,
#                                      binary log on, sync_binlog=1), state in <state>/mariadb-durable,
#                                      for make bench-e2e. Not part of `all`; its own lock.
#   (throwaway CA, wrong CA, server and client certs: openssl, $STATE/tls, made once)
#
# Environment knobs:
#   PAYSERVER_SERVICES_DIR   state dir (data, logs, pid files); default /tmp/payserver-services
#   CLUSTER_REPLICAS         0 or 1; unset = keep the shape of the existing cluster (0 for a new one)
#   NACOS_ENABLE_AUTH        true = run r-nacos with open-API auth on (default false, see below)
#
# r-nacos notes (from the rnacos-0.8.8 source, src/common/mod.rs):
#   * Env names: RNACOS_HTTP_PORT (default 8848), RNACOS_GRPC_PORT (default HTTP+1000),
#     RNACOS_HTTP_CONSOLE_PORT (default HTTP+2000: 10848 for the stock 8848, 20848 for ours),
#     RNACOS_SDK_HOST (bind address of HTTP+gRPC, default 0.0.0.0!), RNACOS_CONSOLE_HOST
#     (defaults to RNACOS_SDK_HOST), RNACOS_DATA_DIR (default ~/.local/share/r-nacos/nacos_db),
#     RNACOS_RAFT_NODE_ADDR (default 127.0.0.1:<grpc port>), RNACOS_RAFT_AUTO_INIT (default true
#     for node id 1: a single-node raft "cluster" is initialised in the data dir on first start).
#   * Start-up race in 0.8.8 on a brand-new data dir (frequent under CPU load): an actor thread
#     panics during raft auto-init and config writes then answer "true" but are never applied.
#     start_nacos detects it (publish/get probe + "panicked" in the log) and retries with a
#     fresh data dir; $STATE/nacos/data.ok marks a data dir that passed the probe.
#   * Auth: the open API / SDK interface (/nacos/v1/..., gRPC) has NO auth by default
#     (RNACOS_ENABLE_OPEN_API_AUTH=false). Set RNACOS_ENABLE_OPEN_API_AUTH=true to require a
#     token (login via POST /nacos/v1/auth/login with username/password; the initial admin user is
#     RNACOS_INIT_ADMIN_USERNAME/RNACOS_INIT_ADMIN_PASSWORD, default admin/admin). The web console
#     always requires a login unless RNACOS_ENABLE_NO_AUTH_CONSOLE=true.
#     To run nacos with auth on from this script: NACOS_ENABLE_AUTH=true scripts/services.sh restart nacos
#     (then unauthenticated open-API calls get 403 "unknown user!"; POST /nacos/v1/auth/login with
#     username=admin&password=admin returns {"accessToken":...}, pass it as ?accessToken=...).
#     `start` never restarts a running nacos to change this: use `restart nacos`.
#   * rnacos also loads a `.env` file (dotenv) from its working directory or any parent unless
#     `-e FILE` is given; we always pass `-e <state>/nacos/rnacos.env` and run it from the state
#     dir so a stray .env cannot change its config.
#
# Install when missing: apt-get (redis-server mariadb-server mariadb-client) and
# `cargo install rnacos --version 0.8.8 --locked` (waits for an install already in progress).
# During apt-get install a temporary /usr/sbin/policy-rc.d stops the packages' postinst from
# auto-starting the system instances (6379 / 3306); either way those are never used here.
set -euo pipefail

export PATH="$HOME/.cargo/bin:$PATH"

SCRIPT_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
STATE="${PAYSERVER_SERVICES_DIR:-/tmp/payserver-services}"
mkdir -p "$STATE"
STATE="$(cd "$STATE" && pwd)"
LOGS="$STATE/logs"
HOST=127.0.0.1

REDIS_PORT=16379
MYSQL_PORT=13306
NACOS_HTTP_PORT=18848
NACOS_GRPC_PORT=19848
NACOS_CONSOLE_PORT=18849
CLUSTER_BASE_PORT=17001
RNACOS_VERSION=0.8.8

MYSQL_DIR="$STATE/mariadb"
MYSQL_DATA="$MYSQL_DIR/data"
MYSQL_SOCK="$MYSQL_DIR/mariadbd.sock"
MYSQL_PID="$MYSQL_DIR/mariadbd.pid"
NACOS_DIR="$STATE/nacos"
CLUSTER_DIR="$STATE/cluster"

log() { echo "$*"; }
err() { echo "services.sh: $*" >&2; }

die_with_log() { # die_with_log MESSAGE LOGFILE
  err "$1"
  if [[ -n "${2:-}" && -f "$2" ]]; then
    echo "---- last 30 lines of $2 ----" >&2
    tail -n 30 "$2" >&2 || true
    echo "----" >&2
  fi
  exit 1
}

# ---------------------------------------------------------------- helpers

lock() {
  # Serialise start/stop between concurrent callers (e.g. parallel test packages).
  # Every daemon is launched with fd 9 closed so it never holds the lock.
  exec 9>"$STATE/.lock"
  flock -w 1800 9 || { err "timed out waiting for $STATE/.lock"; exit 1; }
}

port_listening() { # port_listening PORT
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
  fi
}

listener_pid() { # listener_pid PORT -> pid of OUR kind of server listening on PORT (if ss can tell)
  command -v ss >/dev/null 2>&1 || return 0
  local pid comm
  pid="$(ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2 || true)"
  [[ -n "$pid" ]] || return 0
  comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
  case "$comm" in
    redis-server | redis-sentinel | mariadbd | mysqld | rnacos) echo "$pid" ;;
  esac
}

# A zombie counts as dead: PID 1 in some containers reaps orphans only every second or so.
pid_alive() {
  [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null || return 1
  local st
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$st" && "$st" != Z ]]
}

read_pid() { [[ -f "$1" ]] && tr -dc '0-9' <"$1" || true; }

# launch PIDFILE LOGFILE CMD...: run CMD detached (own session, no inherited stdio or lock fd);
# PIDFILE gets the pid of CMD itself (bash execs into it).
launch() {
  local pidfile="$1" logfile="$2"
  shift 2
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 9>&- &
  disown || true
}

# stop_pid NAME PIDFILE PORT GRACE_SECONDS [SIGNAL]: signal the process, wait until it is gone
# and PORT is free; SIGKILL after GRACE_SECONDS.
stop_pid() {
  local name="$1" pidfile="$2" port="$3" grace="$4" sig="${5:-TERM}"
  local pid
  pid="$(read_pid "$pidfile")"
  if ! pid_alive "$pid"; then
    pid="$(listener_pid "$port")"
  fi
  if pid_alive "$pid"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + grace))
    while pid_alive "$pid"; do
      if ((SECONDS >= deadline)); then
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  fi
  local deadline=$((SECONDS + 15))
  while port_listening "$port"; do
    if ((SECONDS >= deadline)); then
      err "$name: port $port still in use after stop"
      exit 1
    fi
    sleep 0.1
  done
  rm -f "$pidfile"
  log "$name $HOST:$port down"
}

# ---------------------------------------------------------------- install

APT_UPDATED=0
apt_install() {
  if ((APT_UPDATED == 0)); then
    apt-get update -qq >/dev/null 2>&1 || die_with_log "apt-get update failed" ""
    APT_UPDATED=1
  fi
  local created_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >"$LOGS/apt-install.log" 2>&1 9>&- || rc=$?
  ((created_policy)) && rm -f /usr/sbin/policy-rc.d
  if ((rc != 0)); then
    die_with_log "apt-get install $* failed" "$LOGS/apt-install.log"
  fi
}

ensure_apt_packages() {
  local need=0 b
  for b in redis-server redis-cli mariadbd mariadb-install-db mariadb mariadb-admin; do
    command -v "$b" >/dev/null 2>&1 || need=1
  done
  if ((need)); then
    apt_install redis-server mariadb-server mariadb-client
  fi
}

ensure_redis_bin() {
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && return 0
  ensure_apt_packages
}

ensure_mariadb_bin() {
  local b
  for b in mariadbd mariadb-install-db mariadb mariadb-admin; do
    command -v "$b" >/dev/null 2>&1 || { ensure_apt_packages; return 0; }
  done
}

rnacos_bin() {
  if [[ -x "$HOME/.cargo/bin/rnacos" ]]; then
    echo "$HOME/.cargo/bin/rnacos"
  else
    command -v rnacos 2>/dev/null || true
  fi
}

ensure_rnacos_bin() {
  [[ -n "$(rnacos_bin)" ]] && return 0
  # Another process may already be running `cargo install rnacos`: wait for it rather
  # than compiling the same crate twice on a 2-core machine.
  local waited=0
  while [[ -z "$(rnacos_bin)" ]] && pgrep -f 'cargo install rnacos' >/dev/null 2>&1; do
    if ((waited == 0)); then err "nacos: waiting for a running 'cargo install rnacos' to finish"; fi
    sleep 5
    waited=$((waited + 5))
    if ((waited > 3600)); then die_with_log "nacos: timed out waiting for cargo install rnacos" ""; fi
  done
  [[ -n "$(rnacos_bin)" ]] && return 0
  command -v cargo >/dev/null 2>&1 || die_with_log "nacos: cargo not found (needed for 'cargo install rnacos')" ""
  err "nacos: cargo install rnacos --version $RNACOS_VERSION --locked (takes several minutes)"
  cargo install rnacos --version "$RNACOS_VERSION" --locked >"$LOGS/rnacos-install.log" 2>&1 9>&- ||
    die_with_log "nacos: cargo install rnacos failed" "$LOGS/rnacos-install.log"
  [[ -n "$(rnacos_bin)" ]] || die_with_log "nacos: rnacos binary not found after install" "$LOGS/rnacos-install.log"
}

# ---------------------------------------------------------------- redis (standalone)

redis_ping() { [[ "$(redis-cli -h "$HOST" -p "$1" ping 2>/dev/null)" == "PONG" ]]; }

# start_redis_node NAME PORT DIR [extra redis args...]
start_redis_node() {
  local name="$1" port="$2" dir="$3"
  shift 3
  local pidfile="$dir/redis.pid" logfile="$LOGS/$name.log"
  mkdir -p "$dir"
  if pid_alive "$(read_pid "$pidfile")" && redis_ping "$port"; then
    return 0
  fi
  if port_listening "$port"; then
    die_with_log "$name: port $port is in use by another process" ""
  fi
  rm -f "$pidfile"
  : >>"$logfile"
  redis-server --bind "$HOST" --port "$port" --protected-mode yes \
    --save "" --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$pidfile" --logfile "$logfile" \
    "$@" </dev/null >>"$logfile" 2>&1 9>&- ||
    die_with_log "$name: redis-server failed to start" "$logfile"
  local deadline=$((SECONDS + 30))
  until redis_ping "$port"; do
    ((SECONDS < deadline)) || die_with_log "$name: not answering PING on $HOST:$port" "$logfile"
    sleep 0.05
  done
}

start_redis() {
  ensure_redis_bin
  start_redis_node redis "$REDIS_PORT" "$STATE/redis"
  log "redis $HOST:$REDIS_PORT up"
}

stop_redis() { stop_pid redis "$STATE/redis/redis.pid" "$REDIS_PORT" 10 "${1:-TERM}"; }

status_redis() {
  if redis_ping "$REDIS_PORT"; then log "redis $HOST:$REDIS_PORT up"; else log "redis $HOST:$REDIS_PORT down"; fi
}

# ---------------------------------------------------------------- mariadb

mysql_root() { mariadb --no-defaults --protocol=socket --socket="$MYSQL_SOCK" -uroot "$@"; }

mysql_alive() {
  mariadb-admin --no-defaults --protocol=socket --socket="$MYSQL_SOCK" -uroot \
    --connect-timeout=2 ping >/dev/null 2>&1
}

mysql_app_ok() {
  mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" -upayserver -ppayserver \
    --connect-timeout=2 -N -e 'SELECT 1' payserver >/dev/null 2>&1
}

mysql_setup_sql() {
  cat <<'SQL'
CREATE DATABASE IF NOT EXISTS `payserver` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'payserver'@'127.0.0.1' IDENTIFIED BY 'payserver';
CREATE USER IF NOT EXISTS 'payserver'@'localhost' IDENTIFIED BY 'payserver';
GRANT ALL PRIVILEGES ON `payserver`.* TO 'payserver'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `payserver`.* TO 'payserver'@'localhost';
GRANT ALL PRIVILEGES ON `payserver\_%`.* TO 'payserver'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `payserver\_%`.* TO 'payserver'@'localhost';
FLUSH PRIVILEGES;
SQL
}

start_mariadb() {
  ensure_mariadb_bin
  local logfile="$LOGS/mariadb.log"
  mkdir -p "$MYSQL_DIR"
  if pid_alive "$(read_pid "$MYSQL_PID")" && mysql_alive && mysql_app_ok; then
    log "mariadb $HOST:$MYSQL_PORT up"
    return 0
  fi
  if ! pid_alive "$(read_pid "$MYSQL_PID")"; then
    if port_listening "$MYSQL_PORT"; then
      die_with_log "mariadb: port $MYSQL_PORT is in use by another process" ""
    fi
    if [[ ! -f "$MYSQL_DATA/.payserver-initialized" ]]; then
      rm -rf "$MYSQL_DATA"
      mkdir -p "$MYSQL_DATA"
      mariadb-install-db --no-defaults --user=root --datadir="$MYSQL_DATA" \
        --auth-root-authentication-method=normal --skip-test-db \
        >"$LOGS/mariadb-install-db.log" 2>&1 9>&- ||
        die_with_log "mariadb: mariadb-install-db failed" "$LOGS/mariadb-install-db.log"
      touch "$MYSQL_DATA/.payserver-initialized"
    fi
    rm -f "$MYSQL_PID" "$MYSQL_SOCK"
    : >>"$logfile"
    # TLS offered (never required) from the next start on: see the tls section.
    local mysql_ssl_args=()
    # (In a subshell: without the material the shared server still starts, without TLS.)
    if (ensure_tls_material); then
      mysql_ssl_args=(--ssl-ca="$TLS_DIR/ca.crt" --ssl-cert="$TLS_DIR/server.crt" --ssl-key="$TLS_DIR/server.key")
    fi
    # --no-defaults: ignore /etc/mysql/*; everything the tests rely on is set here.
    launch "$MYSQL_DIR/launch.pid" "$logfile" \
      mariadbd --no-defaults --user=root \
      --datadir="$MYSQL_DATA" --socket="$MYSQL_SOCK" --pid-file="$MYSQL_PID" \
      --port="$MYSQL_PORT" --bind-address="$HOST" --skip-name-resolve \
      --log-error="$logfile" \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
      --default-time-zone=+00:00 \
      --max-connections=500 \
      --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
      "${mysql_ssl_args[@]}"
  fi
  local deadline=$((SECONDS + 60))
  until mysql_alive; do
    if ! pid_alive "$(read_pid "$MYSQL_DIR/launch.pid")" && ! pid_alive "$(read_pid "$MYSQL_PID")"; then
      die_with_log "mariadb: mariadbd exited during startup" "$logfile"
    fi
    if ((SECONDS >= deadline)); then
      kill -KILL "$(read_pid "$MYSQL_DIR/launch.pid")" 2>/dev/null || true
      die_with_log "mariadb: not accepting connections after 60s" "$logfile"
    fi
    sleep 0.2
  done
  # mariadbd writes its own pid file; keep ours in sync if it lags.
  [[ -s "$MYSQL_PID" ]] || cp "$MYSQL_DIR/launch.pid" "$MYSQL_PID"
  mysql_setup_sql | mysql_root >>"$logfile" 2>&1 || die_with_log "mariadb: creating db/user failed" "$logfile"
  deadline=$((SECONDS + 30))
  until mysql_app_ok; do
    ((SECONDS < deadline)) || die_with_log "mariadb: payserver@$HOST:$MYSQL_PORT cannot log in" "$logfile"
    sleep 0.2
  done
  log "mariadb $HOST:$MYSQL_PORT up"
}

stop_mariadb() {
  local pidfile="$MYSQL_PID"
  [[ -s "$pidfile" ]] || pidfile="$MYSQL_DIR/launch.pid"
  stop_pid mariadb "$pidfile" "$MYSQL_PORT" 60 "${1:-TERM}"
  rm -f "$MYSQL_PID" "$MYSQL_DIR/launch.pid"
}

status_mariadb() {
  if mysql_app_ok; then log "mariadb $HOST:$MYSQL_PORT up"; else log "mariadb $HOST:$MYSQL_PORT down"; fi
}

# ---------------------------------------------------------------- nacos (r-nacos)

NACOS_URL="http://$HOST:$NACOS_HTTP_PORT"

nacos_http_ok() {
  # 200 (found) or 404 (config not found) both mean the HTTP API is serving; 401/403 too
  # when it runs with NACOS_ENABLE_AUTH=true.
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
    "$NACOS_URL/nacos/v1/cs/configs?dataId=x&group=y" 2>/dev/null || true)"
  [[ "$code" == 200 || "$code" == 404 || "$code" == 401 || "$code" == 403 ]]
}

nacos_up() { nacos_http_ok && port_listening "$NACOS_GRPC_PORT"; }

nacos_token_param() { # prints "&accessToken=..." when nacos runs with auth on, else nothing
  [[ "${NACOS_ENABLE_AUTH:-false}" == true ]] || return 0
  local tok
  tok="$(curl -sf --max-time 3 -X POST "$NACOS_URL/nacos/v1/auth/login" \
    --data-urlencode "username=${RNACOS_INIT_ADMIN_USERNAME:-admin}" \
    --data-urlencode "password=${RNACOS_INIT_ADMIN_PASSWORD:-admin}" 2>/dev/null |
    sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p' || true)"
  [[ -n "$tok" ]] && echo "&accessToken=$tok"
}

nacos_probe_publish_once() { # publish dataId=probe and read it back
  local tp got
  tp="$(nacos_token_param)"
  curl -sf --max-time 3 -X POST "$NACOS_URL/nacos/v1/cs/configs?x=1$tp" \
    -d 'dataId=probe&group=PAY_GROUP&content=hello' >/dev/null 2>&1 || return 1
  got="$(curl -sf --max-time 3 "$NACOS_URL/nacos/v1/cs/configs?dataId=probe&group=PAY_GROUP$tp" 2>/dev/null || true)"
  [[ "$got" == hello ]] || return 1
  # Don't leave the probe behind in PAY_GROUP for tests that list the group.
  curl -sf --max-time 3 -X DELETE "$NACOS_URL/nacos/v1/cs/configs?dataId=probe&group=PAY_GROUP$tp" >/dev/null 2>&1 || true
}

# nacos_wait_ready PIDFILE LOGFILE LOG_OFFSET: waits for HTTP+gRPC, then for a working
# publish/get. Returns 1 on failure, with the reason in NACOS_FAIL.
NACOS_FAIL=""
nacos_wait_ready() {
  local pidfile="$1" logfile="$2" offset="$3"
  local deadline=$((SECONDS + 60))
  until nacos_up; do
    if ! pid_alive "$(read_pid "$pidfile")"; then
      sleep 0.2
      pid_alive "$(read_pid "$pidfile")" || { NACOS_FAIL="rnacos exited during startup"; return 1; }
    fi
    ((SECONDS < deadline)) || { NACOS_FAIL="HTTP $NACOS_HTTP_PORT / gRPC $NACOS_GRPC_PORT not up after 60s"; return 1; }
    sleep 0.1
  done
  deadline=$((SECONDS + 20))
  until nacos_probe_publish_once; do
    # rnacos 0.8.8 has a start-up race on a brand-new data dir: raft auto-init can apply its
    # first log entry before the state machine's dependencies are injected, an actor thread
    # panics (raftapply.rs:421, unwrap on None) and from then on writes answer "true" but are
    # never applied (and that data dir answers 500 after a restart). Detect it and retry.
    if tail -c +"$((offset + 1))" "$logfile" 2>/dev/null | grep -q 'panicked'; then
      NACOS_FAIL="rnacos panicked during raft init"
      return 1
    fi
    ((SECONDS < deadline)) || { NACOS_FAIL="publish/get probe failed for 20s"; return 1; }
    sleep 0.2
  done
}

start_nacos() {
  local pidfile="$NACOS_DIR/rnacos.pid" logfile="$LOGS/nacos.log" okmark="$NACOS_DIR/data.ok"
  mkdir -p "$NACOS_DIR"
  if pid_alive "$(read_pid "$pidfile")" && nacos_up; then
    log "nacos $HOST:$NACOS_HTTP_PORT up (grpc $NACOS_GRPC_PORT)"
    return 0
  fi
  ensure_rnacos_bin
  local bin
  bin="$(rnacos_bin)"
  if pid_alive "$(read_pid "$pidfile")"; then
    # Ours but not answering yet: give it a moment, else replace it.
    local deadline=$((SECONDS + 20))
    until nacos_up || ((SECONDS >= deadline)); do sleep 0.2; done
    if nacos_up; then
      log "nacos $HOST:$NACOS_HTTP_PORT up (grpc $NACOS_GRPC_PORT)"
      return 0
    fi
    stop_pid nacos "$pidfile" "$NACOS_HTTP_PORT" 2 KILL >/dev/null
  fi
  local auth="${NACOS_ENABLE_AUTH:-false}"
  local attempt max_attempts=20 offset p
  for ((attempt = 1; attempt <= max_attempts; attempt++)); do
    if [[ ! -f "$okmark" ]]; then
      rm -rf "$NACOS_DIR/data" # never initialised successfully (or broken): start from scratch
    fi
    mkdir -p "$NACOS_DIR/data"
    for p in "$NACOS_HTTP_PORT" "$NACOS_GRPC_PORT" "$NACOS_CONSOLE_PORT"; do
      if port_listening "$p"; then die_with_log "nacos: port $p is in use by another process" ""; fi
    done
    {
      echo "RNACOS_SDK_HOST=$HOST"
      echo "RNACOS_CONSOLE_HOST=$HOST"
      echo "RNACOS_HTTP_PORT=$NACOS_HTTP_PORT"
      echo "RNACOS_GRPC_PORT=$NACOS_GRPC_PORT"
      echo "RNACOS_HTTP_CONSOLE_PORT=$NACOS_CONSOLE_PORT"
      echo "RNACOS_DATA_DIR=$NACOS_DIR/data"
      echo "RNACOS_RAFT_NODE_ID=1"
      echo "RNACOS_RAFT_NODE_ADDR=$HOST:$NACOS_GRPC_PORT"
      echo "RNACOS_RAFT_AUTO_INIT=true"
      echo "RNACOS_ENABLE_OPEN_API_AUTH=$auth"
      echo "RNACOS_HTTP_WORKERS=2"
    } >"$NACOS_DIR/rnacos.env"
    : >>"$logfile"
    offset="$(stat -c %s "$logfile")"
    # Env vars are passed explicitly too (they win over the env file; dotenv never overrides).
    (
      cd "$NACOS_DIR"
      launch "$pidfile" "$logfile" env \
        RNACOS_SDK_HOST="$HOST" RNACOS_CONSOLE_HOST="$HOST" \
        RNACOS_HTTP_PORT="$NACOS_HTTP_PORT" RNACOS_GRPC_PORT="$NACOS_GRPC_PORT" \
        RNACOS_HTTP_CONSOLE_PORT="$NACOS_CONSOLE_PORT" RNACOS_DATA_DIR="$NACOS_DIR/data" \
        RNACOS_RAFT_NODE_ID=1 RNACOS_RAFT_NODE_ADDR="$HOST:$NACOS_GRPC_PORT" RNACOS_RAFT_AUTO_INIT=true \
        RNACOS_ENABLE_OPEN_API_AUTH="$auth" RNACOS_HTTP_WORKERS=2 \
        "$bin" -e "$NACOS_DIR/rnacos.env"
    )
    sleep 0.1
    if nacos_wait_ready "$pidfile" "$logfile" "$offset"; then
      touch "$okmark"
      log "nacos $HOST:$NACOS_HTTP_PORT up (grpc $NACOS_GRPC_PORT)"
      return 0
    fi
    stop_pid nacos "$pidfile" "$NACOS_HTTP_PORT" 2 KILL >/dev/null
    if [[ -f "$okmark" ]]; then
      err "nacos: $NACOS_FAIL with an existing data dir; re-initialising it (attempt $attempt/$max_attempts)"
    else
      err "nacos: $NACOS_FAIL (attempt $attempt/$max_attempts; retrying with a fresh data dir)"
    fi
    rm -f "$okmark"
  done
  die_with_log "nacos: $NACOS_FAIL" "$logfile"
}

stop_nacos() {
  # rnacos (actix) drains connections for up to 30s on SIGTERM; don't wait that long.
  stop_pid nacos "$NACOS_DIR/rnacos.pid" "$NACOS_HTTP_PORT" 5 "${1:-TERM}"
  local deadline=$((SECONDS + 15))
  while port_listening "$NACOS_GRPC_PORT" || port_listening "$NACOS_CONSOLE_PORT"; do
    ((SECONDS < deadline)) || { err "nacos: gRPC/console port still in use after stop"; exit 1; }
    sleep 0.1
  done
}

status_nacos() {
  if nacos_up; then log "nacos $HOST:$NACOS_HTTP_PORT up (grpc $NACOS_GRPC_PORT)"; else log "nacos $HOST:$NACOS_HTTP_PORT down"; fi
}

# ---------------------------------------------------------------- nacos cluster (r-nacos raft, 3 nodes)
#
# Three r-nacos nodes forming one raft group, apart from the single node above, for the
# Nacos-cluster failover test and for trying a clustered deployment:
#   node N (1..3): HTTP 127.0.0.1:1886N, gRPC 1986N (= HTTP+1000, also the raft address),
#   console 1887N; data in $STATE/nacos-cluster/nN.
# From the rnacos-0.8.8 source (src/common/mod.rs, src/starter.rs): RNACOS_RAFT_NODE_ID,
# RNACOS_RAFT_NODE_ADDR (host:gRPC port, what the other nodes dial), RNACOS_RAFT_AUTO_INIT
# (node 1 only: initialises a one-member group on a fresh data dir) and RNACOS_RAFT_JOIN_ADDR
# (nodes 2 and 3: on a fresh data dir they ask that node to add them). A node restarted on
# its data dir rejoins by itself (membership and log are persisted). GET /nacos/v1/raft/metrics
# on the HTTP port shows a node's view (members, current leader, last applied index).
# Targets: nacos-cluster (all three), nacos-cluster-node:N (one node: start = restart on its
# data dir, kill = SIGKILL), for failover tests.

NACOS_CLUSTER_DIR="$STATE/nacos-cluster"
NACOS_CLUSTER_HTTP_BASE=18860 # node N: HTTP base+N, gRPC base+1000+N, console base+10+N

ncn_http() { echo $((NACOS_CLUSTER_HTTP_BASE + $1)); }
ncn_grpc() { echo $((NACOS_CLUSTER_HTTP_BASE + 1000 + $1)); }
ncn_console() { echo $((NACOS_CLUSTER_HTTP_BASE + 10 + $1)); }
ncn_url() { echo "http://$HOST:$(ncn_http "$1")"; }
ncn_pidfile() { echo "$NACOS_CLUSTER_DIR/n$1/rnacos.pid"; }

nacos_cluster_addrs() { # host:HTTP-port of the three nodes, comma separated
  local n out=()
  for n in 1 2 3; do out+=("$HOST:$(ncn_http "$n")"); done
  (IFS=,; echo "${out[*]}")
}

ncn_up() { # ncn_up N: HTTP API answering and gRPC listening
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
    "$(ncn_url "$1")/nacos/v1/cs/configs?dataId=x&group=y" 2>/dev/null || true)"
  [[ "$code" == 200 || "$code" == 404 ]] && port_listening "$(ncn_grpc "$1")"
}

ncn_metrics() { curl -sf --max-time 2 "$(ncn_url "$1")/nacos/v1/raft/metrics" 2>/dev/null | tr -d ' \n' || true; }

# ncn_in_cluster N: node N sees a leader and a three-member group.
ncn_in_cluster() {
  local m
  m="$(ncn_metrics "$1")"
  [[ "$m" =~ \"current_leader\":[0-9]+ ]] || return 1
  local members
  members="$(grep -o '"members":\[[0-9,]*\]' <<<"$m" | head -n1)"
  [[ "$members" == *1* && "$members" == *2* && "$members" == *3* ]]
}

nacos_cluster_healthy() {
  local n
  for n in 1 2 3; do ncn_up "$n" && ncn_in_cluster "$n" || return 1; done
}

# nacos_cluster_probe: a write through each node is readable from every node.
nacos_cluster_probe() {
  # New content every probe: a node that stopped following (seen with rnacos 0.8.8 after a
  # restart) still serves the previous value, so a fixed content would pass on it.
  local n r got stamp="$$-$RANDOM-$SECONDS"
  for n in 1 2 3; do
    curl -sf --max-time 3 -X POST "$(ncn_url "$n")/nacos/v1/cs/configs" \
      -d "dataId=probe-$n&group=PAY_GROUP&content=hello-$n-$stamp" >/dev/null 2>&1 || return 1
  done
  local deadline=$((SECONDS + 5))
  for n in 1 2 3; do
    for r in 1 2 3; do
      until got="$(curl -sf --max-time 3 "$(ncn_url "$r")/nacos/v1/cs/configs?dataId=probe-$n&group=PAY_GROUP" 2>/dev/null || true)"
        [[ "$got" == "hello-$n-$stamp" ]]; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
      done
    done
  done
}

# start_nacos_cluster_node N [fresh]: launch node N on its data dir (fresh: node 1 initialises
# the group, nodes 2 and 3 join node 1) and wait until its APIs answer.
start_nacos_cluster_node() {
  local n="$1" fresh="${2:-}"
  local dir="$NACOS_CLUSTER_DIR/n$n" pidfile logfile="$LOGS/nacos-cluster-$n.log" bin
  pidfile="$(ncn_pidfile "$n")"
  if pid_alive "$(read_pid "$pidfile")" && ncn_up "$n"; then return 0; fi
  ensure_rnacos_bin
  bin="$(rnacos_bin)"
  if pid_alive "$(read_pid "$pidfile")"; then
    stop_pid "nacos-cluster-node:$n" "$pidfile" "$(ncn_http "$n")" 2 KILL >/dev/null
  fi
  local p
  for p in "$(ncn_http "$n")" "$(ncn_grpc "$n")" "$(ncn_console "$n")"; do
    if port_listening "$p"; then die_with_log "nacos-cluster: port $p is in use by another process" ""; fi
  done
  mkdir -p "$dir/data"
  local auto=false join=""
  if [[ "$n" == 1 ]]; then auto=true; elif [[ -n "$fresh" ]]; then join="$HOST:$(ncn_grpc 1)"; fi
  local -a envs=(
    RNACOS_SDK_HOST="$HOST" RNACOS_CONSOLE_HOST="$HOST"
    RNACOS_HTTP_PORT="$(ncn_http "$n")" RNACOS_GRPC_PORT="$(ncn_grpc "$n")"
    RNACOS_HTTP_CONSOLE_PORT="$(ncn_console "$n")" RNACOS_DATA_DIR="$dir/data"
    RNACOS_RAFT_NODE_ID="$n" RNACOS_RAFT_NODE_ADDR="$HOST:$(ncn_grpc "$n")"
    RNACOS_RAFT_AUTO_INIT="$auto" RNACOS_RAFT_JOIN_ADDR="$join"
    RNACOS_ENABLE_OPEN_API_AUTH=false RNACOS_HTTP_WORKERS=2
  )
  printf '%s\n' "${envs[@]}" >"$dir/rnacos.env"
  : >>"$logfile"
  (
    cd "$dir"
    launch "$pidfile" "$logfile" env "${envs[@]}" "$bin" -e "$dir/rnacos.env"
  )
  local deadline=$((SECONDS + 60))
  until ncn_up "$n"; do
    sleep 0.1
    pid_alive "$(read_pid "$pidfile")" || { NACOS_FAIL="node $n exited during startup"; return 1; }
    ((SECONDS < deadline)) || { NACOS_FAIL="node $n not up after 60s"; return 1; }
  done
}

# nacos_cluster_wait N SECONDS: wait until node N is in a healthy three-member group.
nacos_cluster_wait() {
  local deadline=$((SECONDS + $2))
  until ncn_in_cluster "$1"; do
    ((SECONDS < deadline)) || { NACOS_FAIL="node $1 not in a 3-member group with a leader after $2s"; return 1; }
    sleep 0.2
  done
}

stop_nacos_cluster_nodes() { # stop_nacos_cluster_nodes SIGNAL NODES...
  local sig="$1" n
  shift
  for n in "$@"; do
    stop_pid "nacos-cluster-node:$n" "$(ncn_pidfile "$n")" "$(ncn_http "$n")" 5 "$sig" >/dev/null
    local deadline=$((SECONDS + 15))
    while port_listening "$(ncn_grpc "$n")" || port_listening "$(ncn_console "$n")"; do
      ((SECONDS < deadline)) || { err "nacos-cluster: node $n ports still in use after stop"; exit 1; }
      sleep 0.1
    done
  done
}

start_nacos_cluster() {
  local okmark="$NACOS_CLUSTER_DIR/cluster.ok" attempt n
  mkdir -p "$NACOS_CLUSTER_DIR"
  for ((attempt = 1; attempt <= 5; attempt++)); do
    if [[ -f "$okmark" ]]; then
      # Formed before: (re)start whatever is down on its data dir; the nodes find each other.
      local ok=1
      for n in 1 2 3; do start_nacos_cluster_node "$n" || { ok=0; break; }; done
      if ((ok)); then
        for n in 1 2 3; do nacos_cluster_wait "$n" 30 || { ok=0; break; }; done
      fi
      if ((ok)) && nacos_cluster_probe; then
        log "nacos-cluster $(nacos_cluster_addrs) up"
        return 0
      fi
      err "nacos-cluster: ${NACOS_FAIL:-probe failed}; re-forming it from fresh data dirs (attempt $attempt)"
    fi
    # Fresh: node 1 initialises, then 2 and 3 join it one at a time. rnacos 0.8.8 can panic
    # during raft init on a fresh data dir (see the single-node notes): then start over.
    rm -f "$okmark"
    stop_nacos_cluster_nodes KILL 3 2 1
    rm -rf "$NACOS_CLUSTER_DIR"/n1 "$NACOS_CLUSTER_DIR"/n2 "$NACOS_CLUSTER_DIR"/n3
    local formed=1
    start_nacos_cluster_node 1 fresh || formed=0
    if ((formed)); then
      local deadline=$((SECONDS + 30))
      until [[ "$(ncn_metrics 1)" =~ \"current_leader\":1 ]]; do
        ((SECONDS < deadline)) || { NACOS_FAIL="node 1 did not become leader"; formed=0; break; }
        sleep 0.2
      done
    fi
    for n in 2 3; do
      ((formed)) || break
      start_nacos_cluster_node "$n" fresh || { formed=0; break; }
      local deadline=$((SECONDS + 30))
      until grep -q "\"members\":\[[0-9,]*$n" <<<"$(ncn_metrics 1)"; do
        ((SECONDS < deadline)) || { NACOS_FAIL="node $n did not join"; formed=0; break; }
        sleep 0.2
      done
    done
    if ((formed)); then
      for n in 1 2 3; do nacos_cluster_wait "$n" 30 || { formed=0; break; }; done
    fi
    if ((formed)); then
      local deadline=$((SECONDS + 20))
      until nacos_cluster_probe; do
        if grep -q panicked "$LOGS"/nacos-cluster-[123].log 2>/dev/null; then NACOS_FAIL="a node panicked"; formed=0; break; fi
        ((SECONDS < deadline)) || { NACOS_FAIL="publish/get probe failed for 20s"; formed=0; break; }
        sleep 0.3
      done
    fi
    if ((formed)); then
      touch "$okmark"
      log "nacos-cluster $(nacos_cluster_addrs) up"
      return 0
    fi
    err "nacos-cluster: $NACOS_FAIL (attempt $attempt/5)"
    for n in 1 2 3; do mv -f "$LOGS/nacos-cluster-$n.log" "$LOGS/nacos-cluster-$n.log.failed" 2>/dev/null || true; done
  done
  die_with_log "nacos-cluster: $NACOS_FAIL" "$LOGS/nacos-cluster-1.log.failed"
}

stop_nacos_cluster() {
  stop_nacos_cluster_nodes "${1:-TERM}" 3 2 1
  log "nacos-cluster $(nacos_cluster_addrs) down"
}

status_nacos_cluster() {
  local n
  for n in 1 2 3; do
    if ncn_up "$n"; then
      log "nacos-cluster-node:$n $HOST:$(ncn_http "$n") up ($(ncn_metrics "$n" | grep -o '"state":"[A-Za-z]*"\|"current_leader":[0-9a-z]*' | paste -sd' ' -))"
    else
      log "nacos-cluster-node:$n $HOST:$(ncn_http "$n") down"
    fi
  done
}

# ---------------------------------------------------------------- redis cluster

cluster_replicas() {
  local r="${CLUSTER_REPLICAS:-}"
  if [[ -z "$r" && -f "$CLUSTER_DIR/replicas" ]]; then r="$(cat "$CLUSTER_DIR/replicas")"; fi
  r="${r:-0}"
  [[ "$r" == 0 || "$r" == 1 ]] || die_with_log "CLUSTER_REPLICAS must be 0 or 1 (got $r)" ""
  echo "$r"
}

cluster_ports() { # cluster_ports REPLICAS
  local n=$((3 * ($1 + 1))) i
  for ((i = 0; i < n; i++)); do echo $((CLUSTER_BASE_PORT + i)); done
}

all_cluster_ports() { cluster_ports 1; } # superset, for stop/status

cluster_info_field() { # cluster_info_field PORT FIELD
  redis-cli -h "$HOST" -p "$1" cluster info 2>/dev/null | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

cluster_healthy() { # cluster_healthy REPLICAS: every node up, sees all nodes, state ok, replicas linked
  local r="$1" n p
  n=$((3 * (r + 1)))
  for p in $(cluster_ports "$r"); do
    [[ "$(cluster_info_field "$p" cluster_state)" == ok ]] || return 1
    [[ "$(cluster_info_field "$p" cluster_known_nodes)" == "$n" ]] || return 1
    [[ "$(cluster_info_field "$p" cluster_slots_assigned)" == 16384 ]] || return 1
  done
  if ((r > 0)); then
    for p in $(cluster_ports "$r"); do
      local info
      info="$(redis-cli -h "$HOST" -p "$p" info replication 2>/dev/null | tr -d '\r')"
      if grep -q '^role:slave' <<<"$info"; then
        grep -q '^master_link_status:up' <<<"$info" || return 1
      fi
    done
  fi
}

start_cluster_node() { # start_cluster_node PORT
  local p="$1"
  start_redis_node "cluster-$p" "$p" "$CLUSTER_DIR/$p" \
    --cluster-enabled yes --cluster-config-file "$CLUSTER_DIR/$p/nodes.conf" \
    --cluster-node-timeout 2000 --cluster-require-full-coverage yes
}

stop_cluster_nodes() { # stop_cluster_nodes SIGNAL PORTS...
  local sig="$1" p
  shift
  for p in "$@"; do
    if [[ -f "$CLUSTER_DIR/$p/redis.pid" ]] || port_listening "$p"; then
      stop_pid "cluster-$p" "$CLUSTER_DIR/$p/redis.pid" "$p" 10 "$sig" >/dev/null
    fi
  done
}

wipe_cluster() {
  stop_cluster_nodes TERM $(all_cluster_ports)
  rm -rf "$CLUSTER_DIR"
}

start_cluster() {
  ensure_redis_bin
  local r n p ports
  r="$(cluster_replicas)"
  n=$((3 * (r + 1)))
  ports="$(cluster_ports "$r")"
  local addrs
  addrs="$(sed "s/^/$HOST:/" <<<"$ports" | paste -sd, -)"

  # A cluster of a different shape (other replica count) is torn down and rebuilt.
  if [[ -f "$CLUSTER_DIR/replicas" && "$(cat "$CLUSTER_DIR/replicas")" != "$r" ]]; then
    wipe_cluster
  fi
  local extra
  for extra in $(all_cluster_ports); do
    if ! grep -qx "$extra" <<<"$ports" && [[ -f "$CLUSTER_DIR/$extra/redis.pid" ]]; then wipe_cluster; break; fi
  done

  mkdir -p "$CLUSTER_DIR"
  for p in $ports; do start_cluster_node "$p"; done

  if ! cluster_healthy "$r"; then
    # Nodes restarted from their nodes.conf rejoin by themselves: give them a moment.
    local formed=1
    for p in $ports; do
      [[ "$(cluster_info_field "$p" cluster_known_nodes)" == "$n" && \
        "$(cluster_info_field "$p" cluster_slots_assigned)" == 16384 ]] || { formed=0; break; }
    done
    if ((formed)); then
      local deadline=$((SECONDS + 15))
      until cluster_healthy "$r" || ((SECONDS >= deadline)); do sleep 0.2; done
    fi
    if ! cluster_healthy "$r"; then
      # Fresh nodes (or a broken cluster): (re)create from scratch.
      local fresh=1
      for p in $ports; do
        [[ "$(cluster_info_field "$p" cluster_known_nodes)" == 1 && \
          "$(cluster_info_field "$p" cluster_slots_assigned)" == 0 ]] || { fresh=0; break; }
      done
      if ((fresh == 0)); then
        wipe_cluster
        mkdir -p "$CLUSTER_DIR"
        for p in $ports; do start_cluster_node "$p"; done
      fi
      local create_log="$LOGS/$(basename "$CLUSTER_DIR")-create.log"
      # shellcheck disable=SC2046
      redis-cli --cluster create $(sed "s/^/$HOST:/" <<<"$ports") \
        --cluster-replicas "$r" --cluster-yes >"$create_log" 2>&1 </dev/null ||
        die_with_log "cluster: redis-cli --cluster create failed" "$create_log"
      echo "$r" >"$CLUSTER_DIR/replicas"
      local deadline=$((SECONDS + 60))
      until cluster_healthy "$r"; do
        ((SECONDS < deadline)) || die_with_log "cluster: cluster_state not ok after 60s" "$create_log"
        sleep 0.2
      done
    fi
  fi
  echo "$r" >"$CLUSTER_DIR/replicas"
  log "cluster $addrs up"
}

stop_cluster() {
  local p any=0
  for p in $(all_cluster_ports); do
    if [[ -f "$CLUSTER_DIR/$p/redis.pid" ]] || port_listening "$p"; then
      any=1
      stop_pid "cluster-$p" "$CLUSTER_DIR/$p/redis.pid" "$p" 10 "${1:-TERM}" >/dev/null
    fi
  done
  local r
  r="$(cluster_replicas)"
  log "cluster $(cluster_ports "$r" | sed "s/^/$HOST:/" | paste -sd, -) down"
  : "$any"
}

status_cluster() {
  local r p state
  r="$(cluster_replicas)"
  for p in $(cluster_ports "$r"); do
    if redis_ping "$p"; then
      state="$(cluster_info_field "$p" cluster_state)"
      local role
      role="$(redis-cli -h "$HOST" -p "$p" info replication 2>/dev/null | tr -d '\r' | awk -F: '$1=="role"{print $2}')"
      log "cluster-node $HOST:$p up (cluster_state:${state:-?} role:${role:-?})"
    else
      log "cluster-node $HOST:$p down"
    fi
  done
}

# ---------------------------------------------------------------- redis sentinel (opsconfig)
# A master, one replica and three sentinels, own ports, state under $STATE/sentinel. Only the
# Sentinel failover test uses (and SIGKILLs) these: nothing else points at them.
# `sentinel-node:PORT` addresses one of them; a data node started alone joins as a replica of
# the master the sentinels currently name, so a killed master comes back as a replica.

SENTINEL_DIR="$STATE/sentinel"
SENTINEL_MASTER_NAME=payserver-master
SENTINEL_DATA_PORTS="16400 16401"
SENTINEL_PORTS="16410 16411 16412"
# The sentinels require this password (requirepass, and sentinel-pass between themselves), so
# that payserver's PAYSERVER_REDIS_SENTINEL_PASSWORD is exercised; the data nodes have none.
SENTINEL_PASSWORD=payserver-sentinel

ensure_sentinel_bin() {
  command -v redis-sentinel >/dev/null 2>&1 && return 0
  ensure_redis_bin
  apt_install redis-sentinel
}

sentinel_cli() { # sentinel_cli PORT ARGS...
  local p="$1"
  shift
  redis-cli -h "$HOST" -p "$p" --pass "$SENTINEL_PASSWORD" --no-auth-warning "$@" 2>/dev/null | tr -d '\r'
}

sentinel_ping() { [[ "$(sentinel_cli "$1" ping)" == PONG ]]; }

# sentinel_current_master: HOST:PORT of the master as the first answering sentinel sees it.
sentinel_current_master() {
  local p out
  for p in $SENTINEL_PORTS; do
    out="$(sentinel_cli "$p" sentinel get-master-addr-by-name "$SENTINEL_MASTER_NAME" | paste -sd: -)"
    if [[ -n "$out" && "$out" == *:* ]]; then
      echo "$out"
      return 0
    fi
  done
  return 1
}

start_sentinel_data_node() { # start_sentinel_data_node PORT [MASTER_HOST:PORT]
  local p="$1" master="${2:-}"
  local args=()
  if [[ -n "$master" && "$master" != "$HOST:$p" ]]; then
    args=(--replicaof "${master%:*}" "${master#*:}")
  fi
  start_redis_node "sentinel-$p" "$p" "$SENTINEL_DIR/$p" "${args[@]}"
}

start_sentinel_proc() { # start_sentinel_proc PORT
  local p="$1" dir="$SENTINEL_DIR/$p"
  local conf="$dir/sentinel.conf" pidfile="$dir/sentinel.pid" logfile="$LOGS/sentinel-$p.log"
  mkdir -p "$dir"
  if pid_alive "$(read_pid "$pidfile")" && sentinel_ping "$p"; then return 0; fi
  port_listening "$p" && die_with_log "sentinel-$p: port $p is in use by another process" ""
  # The sentinel rewrites its config (known replicas, sentinels, epoch): write it only once.
  if [[ ! -f "$conf" ]]; then
    cat >"$conf" <<CONF
bind $HOST
port $p
protected-mode yes
dir $dir
sentinel resolve-hostnames no
sentinel monitor $SENTINEL_MASTER_NAME $HOST ${SENTINEL_DATA_PORTS%% *} 2
sentinel down-after-milliseconds $SENTINEL_MASTER_NAME 1000
sentinel failover-timeout $SENTINEL_MASTER_NAME 5000
sentinel parallel-syncs $SENTINEL_MASTER_NAME 1
CONF
  fi
  if ! grep -q '^requirepass' "$conf"; then
    printf 'requirepass "%s"\nsentinel sentinel-pass "%s"\n' "$SENTINEL_PASSWORD" "$SENTINEL_PASSWORD" >>"$conf"
  fi
  rm -f "$pidfile"
  : >>"$logfile"
  redis-sentinel "$conf" --daemonize yes --pidfile "$pidfile" --logfile "$logfile" \
    </dev/null >>"$logfile" 2>&1 9>&- || die_with_log "sentinel-$p: redis-sentinel failed to start" "$logfile"
  local deadline=$((SECONDS + 30))
  until sentinel_ping "$p"; do
    ((SECONDS < deadline)) || die_with_log "sentinel-$p: not answering PING" "$logfile"
    sleep 0.05
  done
}

sentinel_healthy() { # every sentinel sees the master, its replica and the two other sentinels
  local p master
  master="$(sentinel_current_master)" || return 1
  for p in $SENTINEL_PORTS; do
    local m
    m="$(sentinel_cli "$p" sentinel master "$SENTINEL_MASTER_NAME" | paste -sd' ' -)"
    [[ " $m " == *" num-slaves 1 "* && " $m " == *" num-other-sentinels 2 "* && " $m " == *" flags master "* ]] || return 1
  done
  redis-cli -h "${master%:*}" -p "${master#*:}" info replication 2>/dev/null | tr -d '\r' | grep -q '^connected_slaves:1' || return 1
}

start_sentinel() {
  ensure_sentinel_bin
  mkdir -p "$SENTINEL_DIR"
  local master p first="${SENTINEL_DATA_PORTS%% *}"
  # Sentinels first if any has a config: they know who the master is now.
  for p in $SENTINEL_PORTS; do
    [[ -f "$SENTINEL_DIR/$p/sentinel.conf" ]] && start_sentinel_proc "$p"
  done
  master="$(sentinel_current_master || echo "$HOST:$first")"
  if ! redis_ping "${master#*:}"; then
    # The named master is down: if another data node is up, the sentinels will promote it;
    # with none up (a fresh start, or all stopped), start the named master first.
    start_sentinel_data_node "${master#*:}"
  fi
  for p in $SENTINEL_DATA_PORTS; do
    [[ "$HOST:$p" == "$master" ]] && start_sentinel_data_node "$p" || start_sentinel_data_node "$p" "$master"
  done
  for p in $SENTINEL_PORTS; do start_sentinel_proc "$p"; done
  local deadline=$((SECONDS + 60))
  until sentinel_healthy; do
    ((SECONDS < deadline)) || die_with_log "sentinel: master/replica/sentinels not all linked after 60s" "$LOGS/sentinel-${SENTINEL_PORTS%% *}.log"
    sleep 0.2
  done
  log "sentinel master $SENTINEL_MASTER_NAME at $(sentinel_current_master), sentinels $(sentinel_addrs) up"
}

sentinel_addrs() { for p in $SENTINEL_PORTS; do echo "$HOST:$p"; done | paste -sd, -; }

stop_sentinel_node() { # stop_sentinel_node SIGNAL PORT
  local sig="$1" p="$2" pidfile
  pidfile="$SENTINEL_DIR/$p/redis.pid"
  [[ -f "$SENTINEL_DIR/$p/sentinel.pid" ]] && pidfile="$SENTINEL_DIR/$p/sentinel.pid"
  stop_pid "sentinel-node" "$pidfile" "$p" 10 "$sig"
}

stop_sentinel() {
  local p
  for p in $SENTINEL_PORTS $SENTINEL_DATA_PORTS; do
    if [[ -f "$SENTINEL_DIR/$p/redis.pid" || -f "$SENTINEL_DIR/$p/sentinel.pid" ]] || port_listening "$p"; then
      stop_sentinel_node "${1:-TERM}" "$p" >/dev/null
    fi
  done
  log "sentinel $(sentinel_addrs) and data nodes down"
}

start_sentinel_node() { # start_sentinel_node PORT
  local p="$1"
  ensure_sentinel_bin
  if grep -qw "$p" <<<"$SENTINEL_PORTS"; then
    start_sentinel_proc "$p"
  else
    start_sentinel_data_node "$p" "$(sentinel_current_master || true)"
  fi
  log "sentinel-node $HOST:$p up"
}

status_sentinel() {
  local p
  for p in $SENTINEL_DATA_PORTS; do
    if redis_ping "$p"; then log "sentinel-node $HOST:$p up"; else log "sentinel-node $HOST:$p down"; fi
  done
  for p in $SENTINEL_PORTS; do
    if sentinel_ping "$p"; then log "sentinel-node $HOST:$p up (sentinel)"; else log "sentinel-node $HOST:$p down (sentinel)"; fi
  done
  log "sentinel master: $(sentinel_current_master || echo unknown)"
}

# ---------------------------------------------------------------- tls material + redis-tls + mariadb-tls (opsconfig)
# A throwaway CA (and a second, unrelated "wrong" CA for negative tests) made by openssl under
# $STATE/tls, with a server certificate for 127.0.0.1/localhost and a client certificate.

TLS_DIR="$STATE/tls"
REDIS_TLS_PORT=16480
REDIS_TLS_USER=payserver
REDIS_TLS_PASSWORD=payserver-tls
MYSQL_TLS_PORT=13307
MYSQL_TLS_DIR="$STATE/mariadb-tls"

ensure_tls_material() {
  [[ -f "$TLS_DIR/done" ]] && return 0
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  local l="$LOGS/tls-gen.log" d="$TLS_DIR"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=payserver test CA" \
      -keyout "$d/ca.key" -out "$d/ca.crt"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=some other CA" \
      -keyout "$d/wrong-ca.key" -out "$d/wrong-ca.crt"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$d/server.key" -out "$d/server.csr"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -days 3650 -extfile "$d/server.ext" -out "$d/server.crt"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=payserver" -keyout "$d/client.key" -out "$d/client.csr"
    printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
    openssl x509 -req -in "$d/client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -days 3650 -extfile "$d/client.ext" -out "$d/client.crt"
  } >"$l" 2>&1 || die_with_log "tls: openssl failed" "$l"
  chmod 600 "$d"/*.key
  touch "$d/done"
}

redis_tls_cli() {
  redis-cli --tls --cacert "$TLS_DIR/ca.crt" --cert "$TLS_DIR/client.crt" --key "$TLS_DIR/client.key" \
    -h "$HOST" -p "$REDIS_TLS_PORT" --user "$REDIS_TLS_USER" --pass "$REDIS_TLS_PASSWORD" --no-auth-warning "$@" 2>/dev/null
}

redis_tls_ping() { [[ "$(redis_tls_cli ping | tr -d '\r')" == PONG ]]; }

# TLS only (port 0), client certificates required, the default user off and one ACL user.
start_redis_tls() {
  ensure_redis_bin
  ensure_tls_material
  local dir="$STATE/redis-tls" logfile="$LOGS/redis-tls.log"
  local pidfile="$dir/redis.pid"
  mkdir -p "$dir"
  if pid_alive "$(read_pid "$pidfile")" && redis_tls_ping; then
    log "redis-tls $HOST:$REDIS_TLS_PORT up"
    return 0
  fi
  port_listening "$REDIS_TLS_PORT" && die_with_log "redis-tls: port $REDIS_TLS_PORT is in use by another process" ""
  rm -f "$pidfile"
  : >>"$logfile"
  redis-server --bind "$HOST" --port 0 --tls-port "$REDIS_TLS_PORT" --protected-mode yes \
    --tls-cert-file "$TLS_DIR/server.crt" --tls-key-file "$TLS_DIR/server.key" \
    --tls-ca-cert-file "$TLS_DIR/ca.crt" --tls-auth-clients yes \
    --user default off --user "$REDIS_TLS_USER" on ">$REDIS_TLS_PASSWORD" '~*' '&*' +@all \
    --save "" --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$pidfile" --logfile "$logfile" </dev/null >>"$logfile" 2>&1 9>&- ||
    die_with_log "redis-tls: redis-server failed to start" "$logfile"
  local deadline=$((SECONDS + 30))
  until redis_tls_ping; do
    ((SECONDS < deadline)) || die_with_log "redis-tls: not answering PING over TLS on $HOST:$REDIS_TLS_PORT" "$logfile"
    sleep 0.05
  done
  log "redis-tls $HOST:$REDIS_TLS_PORT up"
}

stop_redis_tls() { stop_pid redis-tls "$STATE/redis-tls/redis.pid" "$REDIS_TLS_PORT" 10 "${1:-TERM}"; }

status_redis_tls() {
  if redis_tls_ping; then log "redis-tls $HOST:$REDIS_TLS_PORT up"; else log "redis-tls $HOST:$REDIS_TLS_PORT down"; fi
}

# A second MariaDB with TLS on, its own data dir and port, for the MySQL TLS test; the user
# payserver must connect over TLS (REQUIRE SSL).
mysql_tls_sock() { echo "$MYSQL_TLS_DIR/mariadbd.sock"; }

mysql_tls_alive() {
  mariadb-admin --no-defaults --protocol=socket --socket="$(mysql_tls_sock)" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

start_mariadb_tls() {
  ensure_mariadb_bin
  ensure_tls_material
  local data="$MYSQL_TLS_DIR/data" pidfile="$MYSQL_TLS_DIR/mariadbd.pid" logfile="$LOGS/mariadb-tls.log"
  mkdir -p "$MYSQL_TLS_DIR"
  if pid_alive "$(read_pid "$pidfile")" && mysql_tls_alive; then
    log "mariadb-tls $HOST:$MYSQL_TLS_PORT up"
    return 0
  fi
  if ! pid_alive "$(read_pid "$MYSQL_TLS_DIR/launch.pid")"; then
    port_listening "$MYSQL_TLS_PORT" && die_with_log "mariadb-tls: port $MYSQL_TLS_PORT is in use by another process" ""
    if [[ ! -f "$data/.payserver-initialized" ]]; then
      rm -rf "$data"
      mkdir -p "$data"
      mariadb-install-db --no-defaults --user=root --datadir="$data" \
        --auth-root-authentication-method=normal --skip-test-db >"$LOGS/mariadb-tls-install-db.log" 2>&1 9>&- ||
        die_with_log "mariadb-tls: mariadb-install-db failed" "$LOGS/mariadb-tls-install-db.log"
      touch "$data/.payserver-initialized"
    fi
    rm -f "$pidfile" "$(mysql_tls_sock)"
    : >>"$logfile"
    launch "$MYSQL_TLS_DIR/launch.pid" "$logfile" \
      mariadbd --no-defaults --user=root --datadir="$data" --socket="$(mysql_tls_sock)" --pid-file="$pidfile" \
      --port="$MYSQL_TLS_PORT" --bind-address="$HOST" --skip-name-resolve --log-error="$logfile" \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci --default-time-zone=+00:00 \
      --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=2 \
      --ssl-ca="$TLS_DIR/ca.crt" --ssl-cert="$TLS_DIR/server.crt" --ssl-key="$TLS_DIR/server.key"
  fi
  local deadline=$((SECONDS + 60))
  until mysql_tls_alive; do
    ((SECONDS < deadline)) || die_with_log "mariadb-tls: not accepting connections after 60s" "$logfile"
    sleep 0.2
  done
  sed -e "s/IDENTIFIED BY 'payserver'/IDENTIFIED BY 'payserver' REQUIRE SSL/" <(mysql_setup_sql) |
    mariadb --no-defaults --protocol=socket --socket="$(mysql_tls_sock)" -uroot >>"$logfile" 2>&1 ||
    die_with_log "mariadb-tls: creating db/user failed" "$logfile"
  # Users created before REQUIRE SSL was added keep it this way too.
  echo "ALTER USER 'payserver'@'127.0.0.1' REQUIRE SSL; ALTER USER 'payserver'@'localhost' REQUIRE SSL;" |
    mariadb --no-defaults --protocol=socket --socket="$(mysql_tls_sock)" -uroot >>"$logfile" 2>&1 || true
  log "mariadb-tls $HOST:$MYSQL_TLS_PORT up"
}

stop_mariadb_tls() {
  local pidfile="$MYSQL_TLS_DIR/mariadbd.pid"
  [[ -s "$pidfile" ]] || pidfile="$MYSQL_TLS_DIR/launch.pid"
  stop_pid mariadb-tls "$pidfile" "$MYSQL_TLS_PORT" 60 "${1:-TERM}"
  rm -f "$MYSQL_TLS_DIR/mariadbd.pid" "$MYSQL_TLS_DIR/launch.pid"
}

status_mariadb_tls() {
  if mysql_tls_alive; then log "mariadb-tls $HOST:$MYSQL_TLS_PORT up"; else log "mariadb-tls $HOST:$MYSQL_TLS_PORT down"; fi
}

print_env_opsconfig() {
  cat <<EOV
export PAYSERVER_TEST_REDIS_SENTINELS='$(sentinel_addrs)'
export PAYSERVER_TEST_REDIS_SENTINEL_MASTER='$SENTINEL_MASTER_NAME'
export PAYSERVER_TEST_REDIS_SENTINEL_PASSWORD='$SENTINEL_PASSWORD'
export PAYSERVER_TEST_REDIS_SENTINEL_DATA_ADDRS='$(for p in $SENTINEL_DATA_PORTS; do echo "$HOST:$p"; done | paste -sd, -)'
export PAYSERVER_TEST_TLS_DIR='$TLS_DIR'
export PAYSERVER_TEST_REDIS_TLS_ADDR='$HOST:$REDIS_TLS_PORT'
export PAYSERVER_TEST_REDIS_TLS_USERNAME='$REDIS_TLS_USER'
export PAYSERVER_TEST_REDIS_TLS_PASSWORD='$REDIS_TLS_PASSWORD'
export PAYSERVER_TEST_MYSQL_TLS_DSN='payserver:payserver@tcp($HOST:$MYSQL_TLS_PORT)/payserver?parseTime=true&loc=UTC&multiStatements=true'
EOV
}

# ---------------------------------------------------------------- failover cluster
# A second Redis Cluster, 3 masters + 3 replicas on 17101..17106, for the test that
# SIGKILLs a master: it runs the cluster functions above with its own ports and state
# dir, so the shared cluster (17001..) is never reshaped or killed.

FAILOVER_BASE_PORT=17101
FAILOVER_DIR="$STATE/failover-cluster"

in_failover_cluster() { # in_failover_cluster FUNCTION ARGS...: a cluster function, on the failover cluster
  (
    CLUSTER_DIR="$FAILOVER_DIR"
    CLUSTER_BASE_PORT="$FAILOVER_BASE_PORT"
    CLUSTER_REPLICAS=1
    "$@"
  )
}

failover_addrs() { in_failover_cluster cluster_ports 1 | sed "s/^/$HOST:/" | paste -sd, -; }

start_failover_cluster() {
  in_failover_cluster start_cluster >/dev/null
  log "failover-cluster $(failover_addrs) up"
}

stop_failover_cluster() {
  in_failover_cluster stop_cluster "${1:-TERM}" >/dev/null
  log "failover-cluster $(failover_addrs) down"
}

start_failover_node() { # start_failover_node PORT
  ensure_redis_bin
  in_failover_cluster start_cluster_node "$1"
  log "failover-node $HOST:$1 up"
}

stop_failover_node() { # stop_failover_node PORT SIGNAL
  stop_pid "failover-node" "$FAILOVER_DIR/$1/redis.pid" "$1" 10 "${2:-TERM}"
}

status_failover_cluster() {
  local p
  for p in $(in_failover_cluster cluster_ports 1); do
    if redis_ping "$p"; then
      log "failover-node $HOST:$p up (cluster_state:$(cluster_info_field "$p" cluster_state))"
    else
      log "failover-node $HOST:$p down"
    fi
  done
}

print_failover_cluster_env() {
  echo "export PAYSERVER_TEST_FAILOVER_CLUSTER_ADDRS='$(failover_addrs)'"
}

# lock_for TARGETS...: the failover cluster's targets take their own lock, so that they
# never wait for (or hold up) a `start all` of the shared services.
lock_for() {
  local t own=1
  if [[ "$*" == mariadb-durable ]]; then # the durable MariaDB (perf) has its own lock too
    exec 9>"$STATE/.lock-durable"
    flock -w 1800 9 || { err "timed out waiting for $STATE/.lock-durable"; exit 1; }
    return 0
  fi
  local nc=1 # only the Nacos cluster (its own lock too: the failover test must not wait on `start all`)
  (($# > 0)) || { own=0; nc=0; }
  for t in "$@"; do
    case "$t" in failover-cluster | failover-node:*) ;; *) own=0 ;; esac
    case "$t" in nacos-cluster | nacos-cluster-node:*) ;; *) nc=0 ;; esac
  done
  if ((nc)); then
    exec 9>"$STATE/.lock-nacos-cluster"
    flock -w 1800 9 || { err "timed out waiting for $STATE/.lock-nacos-cluster"; exit 1; }
    return 0
  fi
  if ((own)); then
    exec 9>"$STATE/.lock-failover"
    flock -w 1800 9 || { err "timed out waiting for $STATE/.lock-failover"; exit 1; }
  else
    lock
  fi
}

# ---------------------------------------------------------------- mariadb-durable (perf)
# A third MariaDB, durable the way a payments database runs: every commit flushed to disk
# (innodb_flush_log_at_trx_commit=1), binary log on with sync_binlog=1. Its own port, data
# dir and lock, so the benchmark that needs it (make bench-e2e) never changes the shared
# test server's settings under the tests, and never waits for (or holds up) `start all`.
# Not part of `all`.

MYSQL_DURABLE_PORT=13308
MYSQL_DURABLE_DIR="$STATE/mariadb-durable"

mysql_durable_root() {
  mariadb --no-defaults --protocol=socket --socket="$MYSQL_DURABLE_DIR/mariadbd.sock" -uroot "$@"
}

mysql_durable_alive() {
  mariadb-admin --no-defaults --protocol=socket --socket="$MYSQL_DURABLE_DIR/mariadbd.sock" -uroot \
    --connect-timeout=2 ping >/dev/null 2>&1
}

start_mariadb_durable() {
  ensure_mariadb_bin
  local data="$MYSQL_DURABLE_DIR/data" pidfile="$MYSQL_DURABLE_DIR/mariadbd.pid" logfile="$LOGS/mariadb-durable.log"
  mkdir -p "$MYSQL_DURABLE_DIR"
  if pid_alive "$(read_pid "$pidfile")" && mysql_durable_alive; then
    log "mariadb-durable $HOST:$MYSQL_DURABLE_PORT up"
    return 0
  fi
  if ! pid_alive "$(read_pid "$MYSQL_DURABLE_DIR/launch.pid")"; then
    port_listening "$MYSQL_DURABLE_PORT" &&
      die_with_log "mariadb-durable: port $MYSQL_DURABLE_PORT is in use by another process" ""
    if [[ ! -f "$data/.payserver-initialized" ]]; then
      rm -rf "$data"
      mkdir -p "$data"
      mariadb-install-db --no-defaults --user=root --datadir="$data" \
        --auth-root-authentication-method=normal --skip-test-db >"$LOGS/mariadb-durable-install-db.log" 2>&1 9>&- ||
        die_with_log "mariadb-durable: mariadb-install-db failed" "$LOGS/mariadb-durable-install-db.log"
      touch "$data/.payserver-initialized"
    fi
    rm -f "$pidfile" "$MYSQL_DURABLE_DIR/mariadbd.sock"
    : >>"$logfile"
    # The shared server's settings but for durability (and a buffer pool that holds
    # a benchmark's orders, so that reads do not measure the disk).
    launch "$MYSQL_DURABLE_DIR/launch.pid" "$logfile" \
      mariadbd --no-defaults --user=root --datadir="$data" \
      --socket="$MYSQL_DURABLE_DIR/mariadbd.sock" --pid-file="$pidfile" \
      --port="$MYSQL_DURABLE_PORT" --bind-address="$HOST" --skip-name-resolve --log-error="$logfile" \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci --default-time-zone=+00:00 \
      --max-connections=500 --innodb-buffer-pool-size=256M \
      --innodb-flush-log-at-trx-commit=1 --log-bin="$data/binlog" --server-id=1 \
      --sync-binlog=1 --binlog-format=ROW
  fi
  local deadline=$((SECONDS + 60))
  until mysql_durable_alive; do
    ((SECONDS < deadline)) || die_with_log "mariadb-durable: not accepting connections after 60s" "$logfile"
    sleep 0.2
  done
  mysql_setup_sql | mysql_durable_root >>"$logfile" 2>&1 || die_with_log "mariadb-durable: creating db/user failed" "$logfile"
  log "mariadb-durable $HOST:$MYSQL_DURABLE_PORT up"
}

stop_mariadb_durable() {
  local pidfile="$MYSQL_DURABLE_DIR/mariadbd.pid"
  [[ -s "$pidfile" ]] || pidfile="$MYSQL_DURABLE_DIR/launch.pid"
  stop_pid mariadb-durable "$pidfile" "$MYSQL_DURABLE_PORT" 60 "${1:-TERM}"
  rm -f "$MYSQL_DURABLE_DIR/mariadbd.pid" "$MYSQL_DURABLE_DIR/launch.pid"
}

status_mariadb_durable() {
  if mysql_durable_alive; then
    log "mariadb-durable $HOST:$MYSQL_DURABLE_PORT up ($(mysql_durable_root -N -e \
      'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, " log_bin=", @@log_bin, " sync_binlog=", @@sync_binlog)'))"
  else
    log "mariadb-durable $HOST:$MYSQL_DURABLE_PORT down"
  fi
}

print_mariadb_durable_env() {
  echo "export PAYSERVER_TEST_MYSQL_DURABLE_DSN='payserver:payserver@tcp($HOST:$MYSQL_DURABLE_PORT)/payserver?parseTime=true&loc=UTC'"
}

# ---------------------------------------------------------------- env

print_env() {
  local r
  r="$(cluster_replicas)"
  cat <<EOF
export PAYSERVER_SERVICES_DIR='$STATE'
export PAYSERVER_TEST_SERVICES_SCRIPT='$SCRIPT_PATH'
export PAYSERVER_TEST_REDIS_ADDR='$HOST:$REDIS_PORT'
export PAYSERVER_TEST_MYSQL_DSN='payserver:payserver@tcp($HOST:$MYSQL_PORT)/payserver?parseTime=true&loc=UTC&multiStatements=true'
export PAYSERVER_TEST_MYSQL_ADMIN_DSN='payserver:payserver@tcp($HOST:$MYSQL_PORT)/?parseTime=true&loc=UTC&multiStatements=true'
export PAYSERVER_TEST_NACOS_ADDR='$HOST:$NACOS_HTTP_PORT'
export PAYSERVER_TEST_REDIS_CLUSTER_ADDRS='$(cluster_ports "$r" | sed "s/^/$HOST:/" | paste -sd, -)'
export PAYSERVER_TEST_NACOS_CLUSTER_ADDRS='$(nacos_cluster_addrs)'
EOF
  print_env_opsconfig
  print_failover_cluster_env
  print_mariadb_durable_env
}

# ---------------------------------------------------------------- dispatch

expand_targets() { # expand_targets ARGS... -> one target per line, in start order
  local t
  if (($# == 0)); then set -- all; fi
  for t in "$@"; do
    case "$t" in
      all) printf '%s\n' redis mariadb nacos cluster sentinel redis-tls mariadb-tls ;;
      redis | mariadb | nacos | cluster) echo "$t" ;;
      sentinel | redis-tls | mariadb-tls) echo "$t" ;;
      sentinel-node:[0-9]*) echo "$t" ;;
      mysql) echo mariadb ;;
      redis-cluster) echo cluster ;;
      cluster-node:[0-9]*) echo "$t" ;;
      failover-cluster | failover-node:[0-9]*) echo "$t" ;;
      mariadb-durable) echo "$t" ;;
      nacos-cluster | nacos-cluster-node:[123]) echo "$t" ;;
      *) err "unknown service '$t' (redis|mariadb|nacos|cluster|sentinel|redis-tls|mariadb-tls|failover-cluster|mariadb-durable|nacos-cluster|all|cluster-node:PORT|sentinel-node:PORT|failover-node:PORT|nacos-cluster-node:N)"; exit 2 ;;
    esac
  done
}

do_start() {
  local t targets
  targets="$(expand_targets "$@")"
  for t in $targets; do
    case "$t" in
      cluster-node:*)
        ensure_redis_bin
        start_cluster_node "${t#cluster-node:}"
        log "cluster-node $HOST:${t#cluster-node:} up"
        ;;
      sentinel-node:*) start_sentinel_node "${t#sentinel-node:}" ;;
      failover-node:*) start_failover_node "${t#failover-node:}" ;;
      nacos-cluster-node:*)
        start_nacos_cluster_node "${t#nacos-cluster-node:}" || die_with_log "nacos-cluster: $NACOS_FAIL" "$LOGS/nacos-cluster-${t#nacos-cluster-node:}.log"
        log "nacos-cluster-node:${t#nacos-cluster-node:} $HOST:$(ncn_http "${t#nacos-cluster-node:}") up"
        ;;
      *) "start_${t//-/_}" ;;
    esac
  done
}

do_stop() { # do_stop SIGNAL TARGETS...
  local sig="$1" t
  shift
  local targets
  targets="$(expand_targets "$@" | tac)" # stop in reverse start order
  for t in $targets; do
    case "$t" in
      cluster-node:*)
        local p="${t#cluster-node:}"
        stop_pid "cluster-node" "$CLUSTER_DIR/$p/redis.pid" "$p" 10 "$sig"
        ;;
      sentinel-node:*) stop_sentinel_node "$sig" "${t#sentinel-node:}" ;;
      failover-node:*) stop_failover_node "${t#failover-node:}" "$sig" ;;
      nacos-cluster-node:*)
        stop_nacos_cluster_nodes "$sig" "${t#nacos-cluster-node:}"
        log "nacos-cluster-node:${t#nacos-cluster-node:} down"
        ;;
      *) "stop_${t//-/_}" "$sig" ;;
    esac
  done
}

usage() {
  sed -n '2,20p' "$SCRIPT_PATH" | sed 's/^# \{0,1\}//'
}

main() {
  local cmd="${1:-}"
  shift || true
  mkdir -p "$LOGS"
  case "$cmd" in
    start) lock_for "$@"; do_start "$@" ;;
    stop) lock_for "$@"; do_stop TERM "$@" ;;
    kill) lock_for "$@"; do_stop KILL "$@" ;;
    restart) lock_for "$@"; do_stop TERM "$@"; do_start "$@" ;;
    status)
      command -v redis-cli >/dev/null 2>&1 || { err "redis-cli not installed (run start)"; }
      status_redis; status_mariadb; status_nacos; status_cluster
      status_sentinel; status_redis_tls; status_mariadb_tls; status_failover_cluster
      status_mariadb_durable; status_nacos_cluster
      ;;
    env) print_env ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
