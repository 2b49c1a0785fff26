#!/usr/bin/env bash
# The Apache Kafka reference broker: a single-node KRaft broker+controller on loopback.
#
#   reference-kafka.sh start  [port]   format a fresh log dir, start, wait until it serves,
#                                      print the bootstrap address (127.0.0.1:port)
#   reference-kafka.sh stop   [port]   stop it (SIGTERM, then SIGKILL after 30 s) and wait
#   reference-kafka.sh status [port]   print the bootstrap address if running, else exit 1
#
# port defaults to 19092; the controller listens on port+1. State lives in
# ${RUNNEL_CACHE:-~/.cache/runnel}/ref-kafka/<port>/ (server.properties, data/, server.log,
# stdout.log, pid). `start` on a running broker only prints its address. Jars come from
# setup/kafka.sh, which this runs first (a no-op when the cache is complete).
# REFERENCE_KAFKA_LOG_DIRS=N (default 1) gives the broker N log dirs (log.dirs): data/,
# data2/, ... (the first is metadata.log.dir).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
port="${2:-19092}"
controller_port=$((port + 1))
cache="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
dir="$cache/ref-kafka/$port"
pidfile="$dir/pid"

# Prints the pid of our broker if it is alive. The command line is checked too, so that a
# stale pid file never makes us signal some unrelated process that reused the pid.
running_pid() {
    [ -f "$pidfile" ] || return 1
    local pid
    pid="$(cat "$pidfile")"
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "kafka.Kafka $dir/server.properties" || return 1
    echo "$pid"
}

# True when the broker answers an ApiVersions v0 request with error code 0.
serves() {
    python3 - "$port" <<'PY'
import socket, struct, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    # size, api_key=18 (ApiVersions), api_version=0, correlation_id=7, client_id=null
    s.sendall(struct.pack(">ihhih", 10, 18, 0, 7, -1))
    buf = b""
    while len(buf) < 10:
        chunk = s.recv(10 - len(buf))
        if not chunk:
            sys.exit(1)
        buf += chunk
    _, corr, err = struct.unpack(">iih", buf)
    sys.exit(0 if corr == 7 and err == 0 else 1)
except OSError:
    sys.exit(1)
PY
}

start() {
    if pid="$(running_pid)"; then
        echo "127.0.0.1:$port"
        return 0
    fi
    local libs
    libs="$("$here/setup/kafka.sh")"
    if serves; then
        echo "port $port is already served by another broker; not starting" >&2
        return 1
    fi

    rm -rf "$dir"
    local log_dirs="$dir/data" n
    mkdir -p "$dir/data"
    for n in $(seq 2 "${REFERENCE_KAFKA_LOG_DIRS:-1}"); do
        mkdir -p "$dir/data$n"
        log_dirs="$log_dirs,$dir/data$n"
    done
    sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$controller_port|g" \
        -e "s|@LOG_DIR@|$log_dirs|g" "$here/kafka/server.properties.template" > "$dir/server.properties"

    local java_opts=(-cp "$libs/*" -Dlog4j2.configurationFile="$here/kafka/log4j2-broker.xml"
                     -Dkafka.logs.dir="$dir" -Djava.awt.headless=true)
    # A Kafka cluster id is 16 random bytes in URL-safe base64 without padding.
    local cluster_id
    # Never starting with '-': the storage tool's argument parser would take it for an option.
    cluster_id="$(python3 -c 'import base64, uuid
while True:
    c = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not c.startswith("-"):
        print(c)
        break')"
    java "${java_opts[@]}" -Xmx256m kafka.tools.StorageTool format \
        --config "$dir/server.properties" --cluster-id "$cluster_id" > "$dir/format.log" 2>&1 \
        || { cat "$dir/format.log" >&2; return 1; }

    # Heap and collector: one line shared with the 3-node cluster (cluster/kafka_cluster.py).
    local heap_opts
    read -r -a heap_opts < "$here/kafka/broker-jvm.opts"
    nohup java "${heap_opts[@]}" "${java_opts[@]}" \
        kafka.Kafka "$dir/server.properties" > "$dir/stdout.log" 2>&1 < /dev/null &
    echo $! > "$pidfile"

    local deadline=$((SECONDS + 90))
    until serves; do
        if ! running_pid > /dev/null; then
            echo "reference Kafka exited during start-up; last lines of $dir/server.log:" >&2
            tail -n 40 "$dir/server.log" "$dir/stdout.log" >&2 || true
            return 1
        fi
        if [ $SECONDS -ge $deadline ]; then
            echo "reference Kafka did not serve within 90 s; see $dir/server.log" >&2
            stop
            return 1
        fi
        sleep 0.5
    done
    echo "127.0.0.1:$port"
}

stop() {
    local pid
    pid="$(running_pid)" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.2
    done
    rm -f "$pidfile"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status)
        if running_pid > /dev/null && serves; then
            echo "127.0.0.1:$port"
        else
            echo "reference Kafka on port $port is not running" >&2
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 start|stop|status [port]" >&2
        exit 2
        ;;
esac
