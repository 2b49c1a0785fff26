#!/usr/bin/env bash
# Create (once) the compat-test virtualenv and install the pinned requirements.
# Idempotent: pip only runs when requirements.txt changed since the last install.
# Prints the venv path on the last line of stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQ="$HERE/../requirements.txt"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
VENV="$CACHE/venv"
STAMP="$VENV/.requirements.sha256"
PYTHON="${PYTHON:-python3}"

mkdir -p "$CACHE"
# Serialise concurrent runs (several test sessions may call this at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.venv.lock"
    flock 9
fi
if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        # Debian splits venv/ensurepip into its own package.
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            pyver="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python${pyver}-venv" \
                || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
        fi
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV"
    fi
fi

want="$(sha256sum "$REQ" | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
    "$VENV/bin/python" -m pip install --quiet -r "$REQ"
    echo "$want" > "$STAMP"
fi
echo "$VENV"
