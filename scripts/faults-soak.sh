#!/usr/bin/env bash
# Long fault runs, outside CI: repeats the fault harness's scenarios (compat-tests/cluster)
# CYCLES times with FAULT_SECONDS-long workloads and prints one JSON line per scenario run
# plus totals. Each cycle runs every scenario with the default 3 s warm-up, then the
# replication matrix again with FAULT_WARMUP_LATE (default 6.5 s): a fault that comes
# after franz-go's 5 s MetadataMinAge has passed since its start, as for a long-running
# client. Bounded: CYCLES x (scenarios + 8) x (FAULT_SECONDS + read-back).
#
#   scripts/faults-soak.sh [CYCLES]        (default 5; FAULT_SECONDS default 60)
#
# Uses target/release/runnel when present (RUNNEL_BIN overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES="${1:-5}"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
export FAULT_SECONDS="${FAULT_SECONDS:-60}"
# All eight cases of Kafka's replication test matrix, not only CI's four, and the
# nemeses CI leaves out (a bridge, an isolated quorum leader, random halves, a killed
# majority, the whole cluster killed, a leader's disk replaced; on five brokers, 2|3
# splits with the partition or the quorum leader among the two, and a majorities ring).
export FAULT_MATRIX=all
export FAULT_NEMESES=all
if [ -z "${RUNNEL_BIN:-}" ]; then
    cargo build --release --locked --bins
    export RUNNEL_BIN="$PWD/target/release/runnel"
fi
bash compat-tests/setup/netns.sh
bash compat-tests/setup/python.sh >/dev/null
export FRANZ_BIN="${FRANZ_BIN:-$(bash compat-tests/setup/go.sh | tail -1)}"
out="$(mktemp -d)/faults.jsonl"
export FAULT_RESULTS="$out"
failed=0
for i in $(seq 1 "$CYCLES"); do
    echo "== cycle $i of $CYCLES"
    (cd compat-tests && "$CACHE/venv/bin/python" -m pytest -p no:cacheprovider -q cluster/test_faults.py) \
        || failed=$((failed + 1))
    (cd compat-tests && FAULT_WARMUP="${FAULT_WARMUP_LATE:-6.5}" "$CACHE/venv/bin/python" -m pytest \
        -p no:cacheprovider -q cluster/test_faults.py -k test_replication_matrix) \
        || failed=$((failed + 1))
done
cat "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = ("faults", "acked", "indeterminate", "lost", "duplicates", "inconsistent", "reordered", "phantom")
print(json.dumps({"runs": len(rows), **{k: sum(r[k] for r in rows) for k in keys}}))
for warmup in sorted({r.get("warmup") for r in rows if r.get("warmup") is not None}):
    some = [r for r in rows if r.get("warmup") == warmup]
    print(json.dumps({"warmup": warmup, "runs": len(some), **{k: sum(r[k] for r in some) for k in keys}}))
PY
echo "cycles with a failure: $failed"
[ "$failed" -eq 0 ]
