#!/usr/bin/env bash
# Build and run the official (Java) Nacos server, assembled from the artifacts
# pig-mesh republished on Maven Central (io.github.pig-mesh.nacos), for
# running our Nacos tests against it as well as against r-nacos.
# See docs/NACOS-JAVA.md. Not part of `make test`.
#
#   scripts/nacos-java.sh build   # mvn package: copies the runtime classpath to /tmp/nacos-java-build/lib
#   scripts/nacos-java.sh start   # build if needed, start standalone on 127.0.0.1:28848 (gRPC 29848), wait until ready
#   scripts/nacos-java.sh stop
#   scripts/nacos-java.sh status
#   scripts/nacos-java.sh env     # prints: export PAYSERVER_TEST_NACOS_ADDR=127.0.0.1:28848
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROJ=$ROOT/scripts/nacos-java
BUILD_DIR=${NACOS_JAVA_BUILD_DIR:-/tmp/nacos-java-build}
LIB=$BUILD_DIR/lib
PORT=${NACOS_JAVA_PORT:-28848}          # HTTP; gRPC is PORT+1000, cluster gRPC PORT+1001
HOME_DIR=${NACOS_JAVA_HOME:-/tmp/nacos-java}
PIDFILE=$HOME_DIR/nacos.pid
LOG=$HOME_DIR/stdout.log
ADDR=127.0.0.1:$PORT

build() {
  if [ -d "$LIB" ] && ls "$LIB"/nacos-console-*.jar >/dev/null 2>&1; then return 0; fi
  echo "nacos-java: mvn package (downloads ~190 MB on a cold ~/.m2)" >&2
  (cd "$PROJ" && mvn -B -q package -Dnacos.java.build.dir="$BUILD_DIR")
}

conf() {
  mkdir -p "$HOME_DIR/conf" "$HOME_DIR/logs" "$HOME_DIR/data"
  cat >"$HOME_DIR/conf/application.properties" <<PROPS
nacos.standalone=true
nacos.deployment.type=server
server.address=127.0.0.1
nacos.server.main.port=$PORT
server.servlet.contextPath=/nacos
nacos.server.contextPath=/nacos
nacos.inetutils.ip-address=127.0.0.1
nacos.inetutils.prefer-hostname-over-ip=false
# no auth: the tests publish through the OpenAPI anonymously, as against r-nacos
nacos.core.auth.enabled=false
nacos.core.auth.admin.enabled=false
nacos.core.auth.console.enabled=false
nacos.core.auth.system.type=nacos
nacos.core.auth.server.identity.key=payserver
nacos.core.auth.server.identity.value=payserver
nacos.core.auth.plugin.nacos.token.secret.key=cGF5c2VydmVyLXRlc3Qtb25seS1ub3QtYS1yZWFsLXNlY3JldC0zMi1ieXRlcw==
# Nacos 3 gates the 1.x/2.x HTTP API (/nacos/v1/cs/configs, used by the tests to publish)
nacos.core.api.compatibility.client.enabled=true
nacos.core.api.compatibility.admin.enabled=true
nacos.core.api.compatibility.console.enabled=true
# embedded Derby (no spring.sql.init.platform / db.url settings). Creating the
# Derby database can exceed Hikari's default 3 s login timeout on a busy machine
# ("load derby-schema.sql error ... SQLTimeoutException: Login timeout exceeded").
db.pool.config.connectionTimeout=60000
db.pool.config.validationTimeout=10000
management.endpoints.web.exposure.include=*
server.tomcat.basedir=$HOME_DIR/tomcat
server.tomcat.accesslog.enabled=false
PROPS
}

# pig-mesh did not republish the upstream nacos-bootstrap module, whose main
# class (com.alibaba.nacos.bootstrap.NacosBootstrap) starts the Spring contexts
# in phases; com.alibaba.nacos.Nacos in nacos-console alone fails with
# "IllegalStateException: Nacos don't start up." This does what NacosBootstrap
# does for deployment type "server": core context, then the server web context
# (HTTP API on nacos.server.main.port, gRPC on +1000) as its child. No console UI.
launcher() {
  cat >"$HOME_DIR/NacosJavaLauncher.java" <<'JAVA'
import com.alibaba.nacos.NacosServerBasicApplication;
import com.alibaba.nacos.NacosServerWebApplication;
import com.alibaba.nacos.core.listener.startup.NacosStartUp;
import com.alibaba.nacos.core.listener.startup.NacosStartUpManager;
import com.alibaba.nacos.sys.env.DeploymentType;
import com.alibaba.nacos.sys.env.EnvUtil;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

public class NacosJavaLauncher {
    public static void main(String[] args) {
        EnvUtil.setDeploymentType(DeploymentType.SERVER);
        NacosStartUpManager.start(NacosStartUp.CORE_START_UP_PHASE);
        ConfigurableApplicationContext core = new SpringApplicationBuilder(NacosServerBasicApplication.class)
                .web(WebApplicationType.NONE).run(args);
        NacosStartUpManager.start(NacosStartUp.WEB_START_UP_PHASE);
        new SpringApplicationBuilder(NacosServerWebApplication.class).parent(core)
                .web(WebApplicationType.SERVLET).run(args);
    }
}
JAVA
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

ready() { curl -fsS -m 2 "http://$ADDR/nacos/v3/admin/core/state/readiness" 2>/dev/null | grep -q '"ok"'; }

start() {
  if running; then echo "nacos-java: already running (pid $(cat "$PIDFILE"))" >&2; return 0; fi
  build
  conf
  launcher
  # com.caucho:hessian 4 must shadow com.alipay.sofa:hessian 3.3.6 (see pom.xml)
  local cp h4
  h4=$(ls "$LIB"/hessian-4*.jar)
  cp="$h4:$(ls "$LIB"/*.jar | grep -vxF "$h4" | tr '\n' ':')"
  local t0=$SECONDS
  # shellcheck disable=SC2086
  cd "$HOME_DIR"   # Derby and Tomcat write relative files into the working directory
  nohup java ${NACOS_JAVA_OPTS:--Xms256m -Xmx768m} \
    -Dnacos.standalone=true -Dnacos.home="$HOME_DIR" -Dnacos.logs.path="$HOME_DIR/logs" \
    -Dnacos.server.ip=127.0.0.1 -Djava.net.preferIPv4Stack=true -Dderby.stream.error.file="$HOME_DIR/derby.log" \
    -Dspring.config.additional-location="file:$HOME_DIR/conf/" \
    -cp "$cp" "$HOME_DIR/NacosJavaLauncher.java" >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 180); do
    if ready; then echo "nacos-java: ready on $ADDR (gRPC $((PORT + 1000))) after $((SECONDS - t0))s, pid $(cat "$PIDFILE")" >&2; return 0; fi
    if ! running; then echo "nacos-java: exited; last log lines:" >&2; tail -40 "$LOG" >&2; return 1; fi
    sleep 1
  done
  echo "nacos-java: not ready after 180s; see $LOG and $HOME_DIR/logs" >&2
  return 1
}

stop() {
  if running; then
    local pid; pid=$(cat "$PIDFILE")
    kill "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$PIDFILE"
}

case "${1:-start}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  status) if running && ready; then echo "nacos-java: up on $ADDR (pid $(cat "$PIDFILE"))"; else echo "nacos-java: down"; exit 1; fi ;;
  env) echo "export PAYSERVER_TEST_NACOS_ADDR=$ADDR" ;;
  *) echo "usage: $0 build|start|stop|status|env" >&2; exit 2 ;;
esac
