#!/usr/bin/env bash
# The compatibility suite: installs the clients (idempotent, cached under
# ${RUNNEL_CACHE:-~/.cache/runnel}), then runs
#   1. pytest over compat-tests/ (kcat, Kafka 4.4 tools, confluent-kafka, kafka-python,
#      franz-go, durability, the web console in headless Chromium), each test against
#      its own runnel process;
#   2. the container image under testcontainers-rs, the embedded broker and the
#      subprocess mode (compat-tests/rust/run.sh; starts dockerd);
#   3. librdkafka's own test suite (allow-listed tests) against one runnel process, and
#      its multi-broker tests (tests-cluster.allow) against a three-broker dev-cluster.
# Expects target/debug/runnel (cargo build) or $RUNNEL_BIN.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
export RUNNEL_BIN="${RUNNEL_BIN:-$REPO/target/debug/runnel}"

bash "$HERE/setup/kcat.sh"
bash "$HERE/setup/netns.sh"
bash "$HERE/setup/kafka.sh"
bash "$HERE/setup/python.sh"
bash "$HERE/setup/go.sh"
bash "$HERE/setup/prometheus.sh"
bash "$HERE/setup/chromium.sh"
bash "$HERE/librdkafka/setup.sh"

# Step 2 needs the release binary. Build it now, while pytest runs: pytest's tests mostly
# wait on timers, and the build takes one core at the lowest CPU and I/O priority, so
# the brokers under test keep theirs. This takes ~5 min off the run on two cores.
echo "== release build in the background (for step 2; log: $CACHE/release-build.log)"
mkdir -p "$CACHE"
(cd "$REPO" && exec nice -n 19 ionice -c 3 cargo build --release --locked --bin runnel -j 1) \
    > "$CACHE/release-build.log" 2>&1 &
release_build=$!
trap 'kill "$release_build" 2>/dev/null || true' EXIT

echo "== pytest compat-tests"
cd "$HERE"
"$CACHE/venv/bin/python" -m pytest -p no:cacheprovider -ra --durations=40 "$@" .

echo "== waiting for the release build"
if ! wait "$release_build"; then
    tail -40 "$CACHE/release-build.log"
    echo "the release build failed"
    exit 1
fi
trap - EXIT

echo "== container image, testcontainers, embedded and subprocess modes"
bash "$HERE/rust/run.sh"

echo "== librdkafka test suite (allow-list) against runnel"
# run.sh starts its own runnel, configured as librdkafka's test brokers are (see there).
bash "$HERE/librdkafka/run.sh" runnel

echo "== librdkafka tests that need three brokers (tests-cluster.allow) against a runnel dev-cluster"
bash "$HERE/librdkafka/run.sh" runnel-cluster
