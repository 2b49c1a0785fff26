#!/usr/bin/env bash
# Scale run (not in CI): 10,000 partitions on one broker with this shell's `ulimit -n`,
# runnel and Apache Kafka 4.4 side by side: create time, RSS, descriptors held, one
# record to every partition, SIGTERM time, restart time. Bounded (--budget seconds per
# broker, default 600) and stops its brokers by itself.
#
#   bench/scale.sh                         both brokers, 10,000 partitions
#   bench/scale.sh --partitions 2000 --only runnel
#
# Installs what it needs through bench/setup.sh; writes bench/results/<stamp>-scale.{json,md}.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
eval "$(bash "$here/setup.sh")"
exec "$PYTHON" "$here/scale.py" --runnel "$RUNNEL" --out "$here/results" "$@"
