#!/usr/bin/env bash
# A rolling upgrade from an earlier commit to this checkout, outside CI (it builds a second
# runnel, minutes): compat-tests/cluster/test_upgrade.py on five brokers in network
# namespaces, started on REV's build and upgraded one at a time to this one.
#
#   scripts/upgrade-check.sh REV         (a commit, e.g. the last one that landed)
#
# REV is built in a git worktree under ${RUNNEL_CACHE:-~/.cache/runnel}/previous, with a
# target dir of its own there (kept, so the next run of the same REV builds nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
REV="${1:?usage: scripts/upgrade-check.sh REV}"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
sha="$(git rev-parse --verify "$REV^{commit}")"
tree="$CACHE/previous/$sha"
if [ ! -d "$tree" ]; then
    mkdir -p "$CACHE/previous"
    git worktree add --detach "$tree" "$sha"
fi
(cd "$tree" && CARGO_TARGET_DIR="$CACHE/previous/target" cargo build --release --locked --bins)
cargo build --release --locked --bins
bash compat-tests/setup/netns.sh
bash compat-tests/setup/kafka.sh >/dev/null
bash compat-tests/setup/python.sh >/dev/null
cd compat-tests
RUNNEL_PREVIOUS_BIN="$CACHE/previous/target/release/runnel" RUNNEL_BIN="$PWD/../target/release/runnel" \
    "$CACHE/venv/bin/python" -m pytest -p no:cacheprovider -q cluster/test_upgrade.py
