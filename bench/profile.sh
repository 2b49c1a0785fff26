#!/usr/bin/env bash
# Where runnel's CPU goes under the benchmark's produce and consume load.
#
#   bench/profile.sh [OUT_DIR]     (default OUT_DIR: bench/.work/profile)
#
# Starts runnel (release build, fresh data dir), then for each phase
#   produce-batched   ProducerPerformance acks=1, batch.size=262144 linger.ms=10, 1 partition
#   produce-small     ProducerPerformance acks=all + idempotence, client default batching
#   produce-p8        as produce-batched, into 8 partitions
#   consume           rdkafka_performance consuming the 1-partition topic, no group
#   consume-p8        the same over the 8-partition topic
# records a CPU-clock profile of the runnel process with call graphs (perf record -e
# cpu-clock: works in VMs without hardware counters) and counts its system calls by type
# (syscalls:sys_enter_* tracepoints), and writes for each phase:
#   <phase>.perf.data, <phase>.top.txt (self time by symbol), <phase>.tree.txt (callers),
#   <phase>.dso.txt (kernel vs runnel vs libc), <phase>.syscalls.txt, <phase>.client.txt
# Needs perf (Debian: linux-perf); installed with apt-get when missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/.work/profile}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if ! command -v perf >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
fi
eval "$(bash "$here/setup.sh")"
cp_libs="$KAFKA_LIBS/*"
log4j="$here/../compat-tests/kafka/log4j2-tools.xml"
records="${PROFILE_RECORDS:-400000}"

port="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
data="$(mktemp -d "${TMPDIR:-/tmp}/runnel-profile.XXXXXX")"
"$RUNNEL" --listen "127.0.0.1:$port" --data-dir "$data" > "$out/runnel.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT
until grep -q "runnel ready" "$out/runnel.log"; do sleep 0.05; done
b="127.0.0.1:$port"

perf_tool() {
    java -Xmx512m -XX:+UseSerialGC -cp "$cp_libs" -Dlog4j2.configurationFile="$log4j" \
        org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$b" --topic "$1" \
        --num-records "$records" --record-size 1024 --throughput -1 --print-metrics \
        --command-property "${@:2}"
}

# phase NAME COMMAND...: profile runnel while COMMAND runs.
phase() {
    local name="$1"; shift
    echo "== $name" >&2
    perf record -q -e cpu-clock -F 1999 --call-graph dwarf,32768 -p "$pid" \
        -o "$out/$name.perf.data" 2> "$out/$name.perf.log" &
    local rec=$!
    perf stat -x, -e 'syscalls:sys_enter_*' -p "$pid" -o "$out/$name.syscalls.raw" &
    local st=$!
    sleep 1
    "$@" > "$out/$name.client.txt" 2>&1
    kill -INT "$rec" "$st"; wait "$rec" "$st" || true
    # Counts of the system calls that runnel made, most frequent first.
    grep -v '^#' "$out/$name.syscalls.raw" | awk -F, '$1 ~ /^[0-9]+$/ && $1 > 0 {sub("syscalls:sys_enter_","",$3); print $1, $3}' \
        | sort -rn > "$out/$name.syscalls.txt" || true
    perf report -i "$out/$name.perf.data" --no-children --sort symbol --stdio -g none \
        --percent-limit 0.5 2>/dev/null | grep -v '^$' > "$out/$name.top.txt" || true
    perf report -i "$out/$name.perf.data" --no-children --sort dso --stdio -g none \
        2>/dev/null | grep -v '^$' > "$out/$name.dso.txt" || true
    perf report -i "$out/$name.perf.data" --children --sort symbol --stdio \
        -g caller,0.5,callee,function,percent --percent-limit 3 2>/dev/null > "$out/$name.tree.txt" || true
    grep -E "records sent|request-total|record-send-total|batch-size-avg|records-per-request-avg" \
        "$out/$name.client.txt" | grep -v "node-" | tail -n 6 >&2 || true
    head -n 12 "$out/$name.syscalls.txt" >&2 || true
}

"$PYTHON" - "$b" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("prof-batched", 1, 1), NewTopic("prof-small", 1, 1),
                          NewTopic("prof-p8", 8, 1)]).values():
    f.result(30)
PY
phase produce-batched perf_tool prof-batched acks=1 enable.idempotence=false batch.size=262144 linger.ms=10
phase produce-small perf_tool prof-small acks=all enable.idempotence=true
phase produce-p8 perf_tool prof-p8 acks=1 enable.idempotence=false batch.size=262144 linger.ms=10
phase consume "$RDKAFKA_PERFORMANCE" -C -t prof-batched -p 0 -b "$b" -o beginning -c "$records" -e -i 600000
phase consume-p8 "$RDKAFKA_PERFORMANCE" -C -t prof-p8 -p 0 -p 1 -p 2 -p 3 -p 4 -p 5 -p 6 -p 7 \
    -b "$b" -o beginning -c "$records" -e -i 600000
echo "profiles in $out (perf report -i $out/<phase>.perf.data)" >&2
