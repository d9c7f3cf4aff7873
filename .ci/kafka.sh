#!/usr/bin/env bash
# Starts and stops a single-node Kafka broker (KRaft, Apache Kafka 4.1.1 from
# Maven Central's jars) on loopback, for the ingest tests.
#
#   .ci/kafka.sh start <dir>   fetch the broker's jars (cached in
#                              ~/.cache/tributary/kafka-4.1.1), format the
#                              storage and start the broker with all state
#                              under <dir>; write <dir>/env
#   .ci/kafka.sh stop <dir>    stop it; safe to call twice
#
# <dir>/env exports TRIBUTARY_TEST_KAFKA=127.0.0.1:PORT; `source` it. Facts
# and timings: shared/docs/kafka.md.
set -Eeuo pipefail

VERSION=4.1.1
LIBS=${TRIBUTARY_KAFKA_LIBS:-$HOME/.cache/tributary/kafka-$VERSION}
WAIT=60 # seconds: the bound on every wait

[ $# -eq 2 ] || { echo "usage: $0 start|stop <dir>" >&2; exit 2; }
cmd=$1
dir=$(realpath -m -- "$2")

log() { echo "kafka.sh: $*" >&2; }

# A TCP port below the ephemeral range that nothing listens on now.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 12000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Ready once an ApiVersions v0 request is answered without error.
api_versions_ok() {
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf '\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00' >&3
    local r
    r=$(timeout 2 head -c 10 <&3 | od -An -tx1 | tr -d ' \n')
    exec 3>&-
    [[ ${r:8:12} == 000000010000 ]]
}

fetch_jars() {
    if [ -f "$LIBS/.complete" ]; then return; fi
    local pom
    pom=$(mktemp -d)
    cat >"$pom/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
POM
    rm -rf "$LIBS"
    mkdir -p "$LIBS"
    (cd "$pom" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$LIBS" \
        -DincludeScope=runtime) >&2
    rm -rf "$pom"
    touch "$LIBS/.complete"
}

start() {
    fetch_jars
    rm -rf "$dir"
    mkdir -p "$dir/data" "$dir/logs"
    local port cport
    port=$(free_port)
    cport=$(free_port)
    while [[ $cport == "$port" ]]; do cport=$(free_port); done
    cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
auto.create.topics.enable=true
delete.topic.enable=true
PROPS
    cat >"$dir/log4j2.properties" <<L4J
status=warn
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/logs/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
L4J
    local opts=(-Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
        "-Dlog4j2.configurationFile=$dir/log4j2.properties")
    local cid
    cid=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    java "${opts[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
        -t "$cid" -c "$dir/server.properties" >"$dir/logs/format.log" 2>&1
    setsid nohup java "${opts[@]}" -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
        >"$dir/logs/stdout.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 $((WAIT * 10))); do
        if api_versions_ok "$port"; then
            echo "export TRIBUTARY_TEST_KAFKA=127.0.0.1:$port" >"$dir/env"
            log "broker ready at 127.0.0.1:$port"
            return 0
        fi
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
        sleep 0.1
    done
    log "the broker did not become ready; its log:"
    tail -n 40 "$dir/logs/server.log" "$dir/logs/stdout.log" >&2 || true
    kill -KILL "$(cat "$dir/pid")" 2>/dev/null || true
    return 1
}

stop() {
    [ -f "$dir/pid" ] || return 0
    local pid
    pid=$(cat "$dir/pid")
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 $((WAIT * 10))); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    log "broker killed after ${WAIT} s"
}

case $cmd in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop <dir>" >&2; exit 2 ;;
esac
