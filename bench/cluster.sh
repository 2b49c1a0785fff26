#!/usr/bin/env bash
# Cluster benchmark: a 3-node runnel cluster against a 3-node Apache Kafka 4.4 cluster, both
# in the compat suite's network-namespace harness (needs root). Run by hand, not in CI.
#
#   bench/cluster.sh                 full run: 3 rounds per system (not yet timed; ~15-30 min expected)
#   bench/cluster.sh --smoke         small sizes, one round each (~2 min)
#   bench/cluster.sh --rounds N --records N --rate N --only runnel|kafka --out DIR
#   RUNNEL_BIN=/path/to/runnel bench/cluster.sh     measure another build
#
# Installs what it needs first (bench/setup.sh, compat-tests/setup/go.sh for the franz
# helper, compat-tests/setup/netns.sh for iproute2/iptables). The whole run is bounded by
# CLUSTER_BENCH_LIMIT seconds (default 3600): then it is stopped (SIGTERM, and SIGKILL
# 60 s later) and its clusters go with it. Writes <out>/<stamp>-cluster.{json,md}
# (default out: bench/results/, smoke runs bench/.work/results/). See bench/README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

# shellcheck source=bench/args.sh
source "$here/args.sh"

eval "$(bash "$here/setup.sh")"
bash "$repo/compat-tests/setup/netns.sh" >&2
franz="$(bash "$repo/compat-tests/setup/go.sh" | tail -n 1)"
timeout --signal=TERM --kill-after=60 "${CLUSTER_BENCH_LIMIT:-3600}" \
    "$PYTHON" "$here/cluster.py" --runnel "$RUNNEL" --rdkafka-performance "$RDKAFKA_PERFORMANCE" \
    --franz "$franz" --out "$out" "${args[@]}"
