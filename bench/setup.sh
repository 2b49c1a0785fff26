#!/usr/bin/env bash
# Installs what bench/run.sh needs, idempotently, caching under ${RUNNEL_CACHE:-~/.cache/runnel}:
#   * the shared Python venv (compat-tests/setup/python.sh) plus bench/requirements.txt
#   * the Apache Kafka 4.4 jars: reference broker and its perf tools (compat-tests/setup/kafka.sh)
#   * librdkafka's examples/rdkafka_performance, compiled from the librdkafka sources that
#     compat-tests/librdkafka/setup.sh unpacks and builds, into $CACHE/bench/
#   * runnel itself: cargo build --release (skipped when RUNNEL_BIN names a binary)
# Prints "VAR=value" lines for run.sh on stdout; progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
mkdir -p "$cache/bench"

# Python: the compat suite's venv (confluent-kafka for topic admin, crc32c for the
# start-up probe) plus matplotlib. Same lock as python.sh, own stamp.
venv="$(bash "$repo/compat-tests/setup/python.sh" | tail -n 1)"
req="$here/requirements.txt"
stamp="$venv/.bench-requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    (
        if command -v flock >/dev/null 2>&1; then
            exec 9>"$cache/.venv.lock"
            flock 9
        fi
        echo "bench/setup.sh: installing bench/requirements.txt into $venv" >&2
        "$venv/bin/python" -m pip install --quiet -r "$req" >&2
        echo "$want" > "$stamp"
    )
fi

# Kafka jars (java and maven from Debian if missing).
libs="$(bash "$repo/compat-tests/setup/kafka.sh")"

# rdkafka_performance: librdkafka's own perf tool, linked statically against the library
# the compat suite builds. Rebuilt when the library or the tool's source changes.
rdk_src="$(bash "$repo/compat-tests/librdkafka/setup.sh" | tail -n 1)"
rdk_bin="$cache/bench/rdkafka_performance"
rdk_stamp="$rdk_bin.sha256"
rdk_want="$(cat "$rdk_src/examples/rdkafka_performance.c" "$rdk_src/src/librdkafka.a" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$rdk_bin" ] || [ "$(cat "$rdk_stamp" 2>/dev/null || true)" != "$rdk_want" ]; then
    echo "bench/setup.sh: compiling rdkafka_performance into $rdk_bin" >&2
    # The same libraries librdkafka's own examples/Makefile links with (mklove's LIBS).
    rdk_libs="$(sed -n 's/^LIBS+=//p' "$rdk_src/Makefile.config" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    gcc -O2 -I"$rdk_src/src" "$rdk_src/examples/rdkafka_performance.c" -o "$rdk_bin.tmp" \
        "$rdk_src/src/librdkafka.a" $rdk_libs
    mv -f "$rdk_bin.tmp" "$rdk_bin"
    echo "$rdk_want" > "$rdk_stamp"
fi

# runnel: this checkout's release build, unless RUNNEL_BIN names a binary to measure.
if [ -n "${RUNNEL_BIN:-}" ]; then
    runnel="$RUNNEL_BIN"
else
    (cd "$repo" && cargo build --release --locked --quiet >&2)
    runnel="$repo/target/release/runnel"
fi

echo "PYTHON=$venv/bin/python"
echo "KAFKA_LIBS=$libs"
echo "RDKAFKA_PERFORMANCE=$rdk_bin"
echo "RUNNEL=$runnel"
