#!/usr/bin/env bash
# Build the franz-go helper (compat-tests/franz) into the cache, only when its
# sources changed. Go modules come through Go's default module cache/proxy.
# Prints the binary's path on the last line of stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$(cd "$HERE/../franz" && pwd)"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
OUT="$CACHE/bin/franz"
STAMP="$CACHE/bin/franz.sha256"

mkdir -p "$CACHE"
# Serialise concurrent runs (several test sessions may call this at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.franz.lock"
    flock 9
fi
if ! command -v go >/dev/null 2>&1; then
    for d in /usr/local/go/bin /usr/lib/go/bin; do
        [ -x "$d/go" ] && PATH="$d:$PATH" && break
    done
fi
command -v go >/dev/null 2>&1 || { echo "go.sh: no Go toolchain on PATH" >&2; exit 1; }

want="$( (cd "$SRC" && cat go.mod go.sum ./*.go; go version) | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ ! -x "$OUT" ] || [ "$want" != "$have" ]; then
    mkdir -p "$CACHE/bin"
    (cd "$SRC" && go build -buildvcs=false -trimpath -o "$OUT.tmp" .)
    mv -f "$OUT.tmp" "$OUT"
    echo "$want" > "$STAMP"
fi
echo "$OUT"
