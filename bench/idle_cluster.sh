#!/usr/bin/env bash
# Idle cluster (not in CI): three runnel brokers (`runnel dev-cluster`) keeping N
# partitions of replication factor 3 in sync with no traffic; their CPU seconds over a
# window, with KIP-227 fetch sessions on and off, alternated for --runs rounds. Bounded
# and stops its brokers by itself.
#
#   bench/idle_cluster.sh                                   2,000 partitions, 30 s, 3 runs
#   bench/idle_cluster.sh --partitions 500 --seconds 20 --runs 5
#
# Installs what it needs through bench/setup.sh; writes bench/results/<stamp>-idle-cluster.{json,md}.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
eval "$(bash "$here/setup.sh")"
exec "$PYTHON" "$here/idle_cluster.py" --runnel "$RUNNEL" --out "$here/results" "$@"
