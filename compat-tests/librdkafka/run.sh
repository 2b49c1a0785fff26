#!/usr/bin/env bash
#
# Run librdkafka's own regression tests (tests/test-runner, built by setup.sh)
# against an already running broker.
#
#   run.sh BOOTSTRAP [TEST-ID...]     run the ids given, or every id in tests.allow
#   run.sh BOOTSTRAP --survey [ID...] run every broker-facing test (or the ids given)
#                                     one by one and write a results TSV to the cache
#   run.sh --list                     print the broker-facing test ids and variants
#
# BOOTSTRAP is host:port of a running broker, or "runnel-cluster" (a private three-broker
# `runnel dev-cluster`, running tests-cluster.allow by default), or the word "runnel": then a private
# runnel (target/debug/runnel, or $RUNNEL_BIN; built with cargo if missing) is started
# on a free loopback port with --num-partitions 4 (librdkafka's default scenario) and
# Kafka's built-in group.initial.rebalance.delay.ms of 3000 (what librdkafka's own CI
# brokers run with), plus $RUNNEL_ARGS, and stopped when the run ends.
#
# A TEST-ID is librdkafka's 4-digit test number ("0012"); the test-runner selects
# by number, so an id runs every broker-facing variant of that number (for example
# 0045 runs 0045_subscribe_update, 0045_resubscribe_with_regex, ...). Variants that
# librdkafka assigns to another test scenario are selected with ID:SCENARIO, e.g.
# "0107:noautocreate" (a broker with auto.create.topics.enable=false). A suffix
# "@full" (e.g. "0137@full") runs that test without quick mode: -Q skips every
# sub-test that is not marked quick, which leaves some tests empty.
# Local-only tests (no broker needed; mock cluster, unit tests) are never run here:
# the test-runner gets -L.
#
# Every test runs in its own test-runner process in quick mode (-Q), bounded by
# PER_TEST_TIMEOUT seconds of wall-clock time. The last line of output is
# "N passed, N failed[, N skipped]"; the exit status is non-zero if any test failed.
#
# Environment:
#   RUNNEL_CACHE            cache root (default ~/.cache/runnel)
#   PER_TEST_TIMEOUT        wall-clock bound per test id, seconds (default 120)
#   TEST_KAFKA_VERSION      broker version the harness assumes for version-gated
#                           tests (default 4.0.0)
#   TEST_TIMEOUT_MULTIPLIER test.timeout.multiplier for librdkafka's own timeouts (default 1)
#   TEST_CONSUMER_GROUP_PROTOCOL  classic (default) or consumer (KIP-848)
#   TEST_ARGS               extra test-runner arguments (default "-Q")
#   JOBS                    tests run concurrently (default 4; they mostly wait on timers)
#   SURVEY_JOBS             tests run concurrently by --survey (default 2)
#   SURVEY_OUT              TSV written by --survey
#                           (default $CACHE/librdkafka/survey-<BOOTSTRAP>.tsv)
#   KEEP_LOGS               directory for per-test logs (default: a fresh one under the cache)

set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}/librdkafka"
export PER_TEST_TIMEOUT="${PER_TEST_TIMEOUT:-120}"
export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.0.0}"
TEST_TIMEOUT_MULTIPLIER="${TEST_TIMEOUT_MULTIPLIER:-1}"
TEST_ARGS="${TEST_ARGS:--Q}"
SURVEY_JOBS="${SURVEY_JOBS:-2}"

usage() {
    sed -n '3,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

SRC_DIR="$("${HERE}/setup.sh")" || { echo "setup.sh failed" >&2; exit 1; }
TESTS_DIR="${SRC_DIR}/tests"
RUNNER="${TESTS_DIR}/test-runner"
export LD_LIBRARY_PATH="${SRC_DIR}/src:${SRC_DIR}/src-cpp${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"

# Inventory of test variants from tests/test.c: name, number, flags, scenario.
inventory() {
    python3 - "${TESTS_DIR}/test.c" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
body = src[src.index("struct test tests[] = {"):]
body = body[:body.index("{NULL}};")]
for chunk in body.split("_TEST(")[1:]:
    # the entry ends at the first "),\n" that closes _TEST(
    depth, end = 1, 0
    for i, c in enumerate(chunk):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    entry = chunk[:end]
    parts = [p.strip() for p in re.split(r",(?![^(]*\))", entry)]
    name, flags = parts[0], parts[1]
    m = re.search(r'\.scenario\s*=\s*"([^"]*)"', entry)
    scenario = m.group(1) if m else "default"
    print(f"{name}\t{name[:4]}\t{flags}\t{scenario}")
PY
}

# Broker-facing ids: NNNN for default-scenario variants, NNNN:scenario otherwise.
# Local-only, manual and upstream known-issue variants are left out.
broker_ids() {
    inventory | awk -F'\t' '
        $3 ~ /TEST_F_LOCAL|TEST_F_MANUAL|TEST_F_KNOWN_ISSUE([^_]|$)/ { next }
        {
            n = split($4, sc, ",")
            for (i = 1; i <= n; i++) {
                id = (sc[i] == "default") ? $2 : $2 ":" sc[i]
                if (!(id in seen)) { seen[id] = 1; print id }
            }
        }'
}

# Expected variant names for an id.
variants_of() {
    local num="${1%%:*}" scen="default"
    [[ "$1" == *:* ]] && scen="${1#*:}"
    inventory | awk -F'\t' -v num="$num" -v scen="$scen" '
        $2 == num && $3 !~ /TEST_F_LOCAL|TEST_F_MANUAL|TEST_F_KNOWN_ISSUE([^_]|$)/ {
            n = split($4, sc, ",")
            for (i = 1; i <= n; i++) if (sc[i] == scen) { print $1; break }
        }'
}

if [[ "${1:-}" == --list ]]; then
    inventory | awk -F'\t' '$3 !~ /TEST_F_LOCAL|TEST_F_MANUAL|TEST_F_KNOWN_ISSUE([^_]|$)/ {print $2 "\t" $1 "\t" $4}'
    exit 0
fi

BOOTSTRAP="${1:-}"
[[ -n "${BOOTSTRAP}" && "${BOOTSTRAP}" != -* ]] || usage
shift
SURVEY=0
if [[ "${1:-}" == --survey ]]; then SURVEY=1; shift; fi

label="$(echo "${BOOTSTRAP}" | tr -c 'A-Za-z0-9.\n' '_')"
LOG_DIR="${KEEP_LOGS:-${CACHE}/runs/$(date +%Y%m%d-%H%M%S)-${label}-$$}"
# Tests run in LOG_DIR/wd (their stats_*.json files land there); 0053 reads
# ../src/statistics_schema.json relative to the working directory.
mkdir -p "${LOG_DIR}/wd"
ln -sfn "${SRC_DIR}/src" "${LOG_DIR}/src"

# BOOTSTRAP "runnel": start a private runnel broker for this run (and stop it at exit),
# configured like librdkafka's default test scenario: auto-created topics get 4
# partitions (see tests/scenarios/default.json). Its group tests are written against
# brokers that trivup starts with Kafka's built-in defaults, so a new group's first
# rebalance waits group.initial.rebalance.delay.ms = 3000 ms for members starting together
# (runnel's dev default is 0). RUNNEL_BIN and RUNNEL_ARGS adjust it.
if [[ "${BOOTSTRAP}" == runnel ]]; then
    REPO="$(cd "${HERE}/../.." && pwd)"
    RUNNEL_BIN="${RUNNEL_BIN:-${REPO}/target/debug/runnel}"
    if [[ ! -x "${RUNNEL_BIN}" ]]; then
        (cd "${REPO}" && cargo build) || { echo "cargo build failed" >&2; exit 1; }
    fi
    RUNNEL_DATA="$(mktemp -d "${TMPDIR:-/tmp}/runnel-librdkafka.XXXXXX")"
    # shellcheck disable=SC2086
    "${RUNNEL_BIN}" --listen 127.0.0.1:0 --data-dir "${RUNNEL_DATA}" \
        --num-partitions 4 --group-initial-rebalance-delay-ms 3000 ${RUNNEL_ARGS:-} \
        > "${LOG_DIR}/runnel.log" 2>&1 &
    RUNNEL_PID=$!
    trap 'kill "${RUNNEL_PID}" 2>/dev/null; wait "${RUNNEL_PID}" 2>/dev/null; rm -rf "${RUNNEL_DATA}"' EXIT
    BOOTSTRAP=""
    for _ in $(seq 1 300); do
        BOOTSTRAP="$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "${LOG_DIR}/runnel.log" | head -1)"
        [[ -n "${BOOTSTRAP}" ]] && break
        kill -0 "${RUNNEL_PID}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z "${BOOTSTRAP}" ]]; then
        echo "runnel did not start; see ${LOG_DIR}/runnel.log" >&2
        tail -20 "${LOG_DIR}/runnel.log" >&2
        exit 1
    fi
    echo "started ${RUNNEL_BIN} on ${BOOTSTRAP} (log: ${LOG_DIR}/runnel.log)" >&2
fi

# BOOTSTRAP "runnel-cluster": a private three-broker cluster (`runnel dev-cluster`) for the
# tests that need several brokers or replication factor 3 (tests-cluster.allow): brokers in
# racks RACK1..RACK3 (the names 0101 expects for client.rack), follower fetching on, the
# same partitions and rebalance delay as "runnel", and no auto-created topics (these tests
# create their topics; the :noautocreate scenario wants it off).
if [[ "${BOOTSTRAP}" == runnel-cluster ]]; then
    REPO="$(cd "${HERE}/../.." && pwd)"
    RUNNEL_BIN="${RUNNEL_BIN:-${REPO}/target/debug/runnel}"
    if [[ ! -x "${RUNNEL_BIN}" ]]; then
        (cd "${REPO}" && cargo build) || { echo "cargo build failed" >&2; exit 1; }
    fi
    RUNNEL_DATA="$(mktemp -d "${TMPDIR:-/tmp}/runnel-librdkafka.XXXXXX")"
    # A base port whose client (+0..2), controller (+100..102) and HTTP (+200..202) ports are free.
    BASE="$(python3 - <<'PY'
import socket
for _ in range(100):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); base = s.getsockname()[1]; s.close()
    if base + 202 > 65535:
        continue
    ports, ok = [base + d + i for d in (0, 100, 200) for i in range(3)], True
    for p in ports:
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            t.close()
    if ok:
        print(base); break
PY
)"
    # shellcheck disable=SC2086
    "${RUNNEL_BIN}" dev-cluster --nodes 3 --base-port "${BASE}" --data-root "${RUNNEL_DATA}" -- \
        --num-partitions 4 --group-initial-rebalance-delay-ms 3000 --auto-create-topics false \
        --rack 'RACK{node}' --replica-selector-class org.apache.kafka.common.replica.RackAwareReplicaSelector \
        ${RUNNEL_ARGS:-} > "${LOG_DIR}/runnel.log" 2>&1 &
    RUNNEL_PID=$!
    trap 'kill "${RUNNEL_PID}" 2>/dev/null; wait "${RUNNEL_PID}" 2>/dev/null; rm -rf "${RUNNEL_DATA}"' EXIT
    BOOTSTRAP=""
    for _ in $(seq 1 600); do
        BOOTSTRAP="$(sed -n 's/.*bootstrap servers: *\([0-9.:,]*\).*/\1/p' "${LOG_DIR}/runnel.log" | head -1)"
        [[ -n "${BOOTSTRAP}" ]] && break
        kill -0 "${RUNNEL_PID}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z "${BOOTSTRAP}" ]]; then
        echo "runnel dev-cluster did not start; see ${LOG_DIR}/runnel.log" >&2
        tail -20 "${LOG_DIR}/runnel.log" >&2
        exit 1
    fi
    ALLOW="${HERE}/tests-cluster.allow"
    echo "started a ${RUNNEL_BIN} dev-cluster on ${BOOTSTRAP} (logs: ${RUNNEL_DATA}, ${LOG_DIR}/runnel.log)" >&2
fi

# Wait (briefly) for the broker to accept TCP connections.
first="${BOOTSTRAP%%,*}"
host="${first%:*}"; port="${first##*:}"
for _ in $(seq 1 50); do
    if (exec 3<>"/dev/tcp/${host}/${port}") 2>/dev/null; then break; fi
    sleep 0.2
done
if ! (exec 3<>"/dev/tcp/${host}/${port}") 2>/dev/null; then
    echo "no broker reachable at ${BOOTSTRAP}" >&2
    exit 1
fi
CONF="${LOG_DIR}/test.conf"
cat > "${CONF}" <<EOF
bootstrap.servers=${BOOTSTRAP}
# Brokers under test may be slow to answer the first requests.
test.timeout.multiplier=${TEST_TIMEOUT_MULTIPLIER}
test.topic.random=true
EOF
export RDKAFKA_TEST_CONF="${CONF}"

# Run one id; print "id<TAB>status<TAB>seconds<TAB>variants<TAB>reason".
run_one() {
    local tid="$1" id="${1%@full}" args="${TEST_ARGS}" num scen="default" log rc start secs
    # ID@full: run without quick mode (-Q), i.e. also the sub-tests that -Q skips
    [[ "${tid}" == *@full ]] && args="${TEST_ARGS//-Q/}"
    num="${id%%:*}"
    [[ "$id" == *:* ]] && scen="${id#*:}"
    log="${LOG_DIR}/${tid/:/_}.log"
    start=$(date +%s.%N)
    # CI=true would make the test-runner triple its timeouts: keep runs comparable.
    ( cd "${LOG_DIR}/wd" && exec env -u CI TESTS="${num}" TEST_SCENARIO="${scen}" \
        timeout -k 10 "${PER_TEST_TIMEOUT}" stdbuf -oL -eL "${RUNNER}" -L -p1 ${args} -s "${scen}" ) \
        > "${log}" 2>&1
    rc=$?
    secs=$(python3 -c "import time; print(f'{time.time() - ${start}:.1f}')")
    python3 - "${log}" "${rc}" "${secs}" "${tid}" $(variants_of "${id}") <<'PY'
import os, re, sys
log, rc, secs, tid, expected = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
text = re.sub(r"\x1b\[[0-9;]*m", "", open(log, errors="replace").read())
summary = {}
for m in re.finditer(r"^\|\s*(\S+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|\s*[\d.]+s\s*\|(.*)$", text, re.M):
    summary[m.group(1)] = (m.group(2), m.group(3).strip())
fails = re.findall(r'### Test "([^"]+)" failed at ([^\n]*?) ###\n([^\n]*)', text)
states, reasons = [], []
for v in expected:
    failed_line = next((f"{f[2]} ({f[1]})" for f in fails if f[0] == v or f[0].startswith(v + " (")), "")
    if v in summary:
        st, why = summary[v]
    elif failed_line:
        st, why = "FAILED", failed_line          # failed, then the runner aborted
    elif rc in (124, 137):
        st, why = "TIMEOUT", ""
    elif re.search(r"Running test " + re.escape(v) + r"\b", text):
        st, why = "CRASHED", ""
    else:
        st, why = "NOT_RUN", ""
    if st == "RUNNING":
        st = "TIMEOUT"
    states.append((v, st))
    if st in ("FAILED", "TIMEOUT", "CRASHED", "NOT_RUN"):
        if not why:
            why = next((f"{f[2]} ({f[1]})" for f in fails if f[0].startswith(v)), "")
        if not why and st == "TIMEOUT":
            why = f"no result within the {os.environ.get('PER_TEST_TIMEOUT')} s wall-clock bound"
        if not why:
            tail = [l for l in text.strip().splitlines() if l.strip()][-1:] or [""]
            why = f"exit {rc}: {tail[0][:200]}"
        reasons.append(f"{v}: {why}")
    elif st == "SKIPPED" and why:
        reasons.append(f"{v}: skipped: {why}")
sts = {s for _, s in states}
if not expected:
    overall = "SKIPPED"; reasons.append("no broker-facing variant for this id/scenario")
elif sts & {"FAILED", "CRASHED", "NOT_RUN"}:
    overall = "FAILED"
elif "TIMEOUT" in sts:
    overall = "TIMEOUT"
elif sts == {"SKIPPED"}:
    overall = "SKIPPED"
else:
    overall = "PASSED"
var = ",".join(f"{v}={s}" for v, s in states)
reason = " | ".join(reasons).replace("\t", " ").replace("\n", " ")[:600]
print(f"{tid}\t{overall}\t{secs}\t{var}\t{reason}")
PY
}

read_allow() {
    grep -Ev '^[[:space:]]*(#|$)' "${ALLOW:-${HERE}/tests.allow}" | awk '{print $1}'
}

if ((SURVEY)); then
    if (($#)); then ids=("$@"); else mapfile -t ids < <(broker_ids); fi
    OUT="${SURVEY_OUT:-${CACHE}/survey-${label}.tsv}"
    NJOBS="${SURVEY_JOBS}"
else
    if (($#)); then ids=("$@"); else mapfile -t ids < <(read_allow); fi
    OUT="${LOG_DIR}/results.tsv"
    NJOBS="${JOBS:-4}"
fi
((${#ids[@]})) || { echo "no tests to run" >&2; exit 1; }
echo "running ${#ids[@]} test ids against ${BOOTSTRAP}, ${NJOBS} at a time," \
     "at most ${PER_TEST_TIMEOUT}s each; logs in ${LOG_DIR}" >&2
export -f run_one variants_of inventory
export LOG_DIR RUNNER TESTS_DIR PER_TEST_TIMEOUT TEST_ARGS
tmp="${OUT}.partial"
printf 'id\tstatus\tseconds\tvariants\treason\n' > "${tmp}"
printf '%s\n' "${ids[@]}" \
    | xargs -P "${NJOBS}" -I{} bash -c 'r=$(run_one "$1"); echo "$r"; echo "$r" >> "$2"' _ {} "${tmp}" \
    | while IFS=$'\t' read -r tid st secs _; do printf '%-18s %-8s %6ss\n' "${tid}" "${st}" "${secs}"; done
{ head -1 "${tmp}"; tail -n +2 "${tmp}" | sort; } > "${OUT}"
rm -f "${tmp}"
((SURVEY)) && echo "survey written to ${OUT}" >&2
results="$(tail -n +2 "${OUT}")"
bad="$(awk -F'\t' '$2!="PASSED" && $2!="SKIPPED"' <<<"${results}")"
if [[ -n "${bad}" ]]; then
    echo
    echo "not passed:"
    while IFS=$'\t' read -r tid st secs var why; do
        printf '  %-18s %-8s %s\n      log: %s\n' "${tid}" "${st}" "${why:0:300}" "${LOG_DIR}/${tid/:/_}.log"
    done <<<"${bad}"
fi

passed=$(awk -F'\t' '$2=="PASSED"' <<<"${results}" | grep -c . || true)
failed=$(awk -F'\t' '$2=="FAILED"||$2=="TIMEOUT"||$2=="CRASHED"' <<<"${results}" | grep -c . || true)
skipped=$(awk -F'\t' '$2=="SKIPPED"' <<<"${results}" | grep -c . || true)
total_secs=$(awk -F'\t' '{s+=$3} END {printf "%.0f", s}' <<<"${results}")
echo
echo "librdkafka $(sed -n 's/.*"librdkafka": *"\([^"]*\)".*/\1/p' "${SRC_DIR}/../../package.json") tests against ${BOOTSTRAP}: ${total_secs}s of test time, logs in ${LOG_DIR}"
if ((failed)); then
    echo "failed: $(awk -F'\t' '$2!="PASSED"&&$2!="SKIPPED"{printf "%s ", $1}' <<<"${results}")"
fi
line="${passed} passed, ${failed} failed"
((skipped)) && line+=", ${skipped} skipped"
echo "${line}"
((failed == 0))
