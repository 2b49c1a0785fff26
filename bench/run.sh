#!/usr/bin/env bash
# Side-by-side benchmark: runnel against Apache Kafka 4.4 on this machine.
#
#   bench/run.sh            full run (3 rounds per broker, ~13 min on a quiet 2-core machine)
#   bench/run.sh --smoke    a tiny run of every figure (60-100 s after setup; CI runs this)
#   bench/run.sh --rounds N / --out DIR   override the round count / results directory
#   bench/run.sh --only codecs            only these figure groups (produce, consume, latency,
#                                         rdkafka, codecs, http; comma-separated), start-up and memory
#   bench/run.sh --baseline BIN           another runnel binary in Kafka's place (A/B of two builds)
#
# Installs what it needs first (bench/setup.sh; cached under ${RUNNEL_CACHE:-~/.cache/runnel}).
# Prints the table and writes <out>/<stamp>-<mode>.{json,md,png} (default out: bench/results/
# for full runs, bench/.work/results/ for smoke runs). See bench/README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# shellcheck source=bench/args.sh
source "$here/args.sh"

eval "$(bash "$here/setup.sh")"
exec "$PYTHON" "$here/bench.py" --runnel "$RUNNEL" --rdkafka-performance "$RDKAFKA_PERFORMANCE" \
    --out "$out" "${args[@]}"
