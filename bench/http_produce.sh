#!/usr/bin/env bash
# HTTP produce throughput against Kafka-protocol produce on one runnel broker; see
# bench/http_produce.py. Uses the compat suite's venv (bench/setup.sh creates it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${RUNNEL_CACHE:-$HOME/.cache/runnel}/venv"
exec "$venv/bin/python" "$here/http_produce.py" "$@"
