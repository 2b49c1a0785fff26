#!/usr/bin/env bash
# Makes sure a Docker engine answers `docker info`, idempotently:
#   * installs Debian's `docker.io` when dockerd is missing (apt-get update first when
#     the package lists are empty or the install fails on stale lists);
#   * starts dockerd in the background (its own session, log in $DOCKERD_LOG) when the
#     engine is not up, and waits until `docker info` answers.
# Run as root. Exits non-zero with the tail of dockerd's log when the engine won't start.
set -euo pipefail

log="${DOCKERD_LOG:-/var/log/runnel-dockerd.log}"
timeout_s="${DOCKERD_START_TIMEOUT:-90}"

up() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && up; then
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
        apt-get update -qq
    fi
    # Debian's package, no registry beyond the machine's apt sources.
    if ! apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null
    fi
    # The package's maintainer script may have started the engine already.
    if up; then
        exit 0
    fi
fi

if ! pidof dockerd >/dev/null 2>&1; then
    # A stale pid file from a dockerd that died stops the next one from starting.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    echo "starting dockerd (log: $log)" >&2
    setsid nohup dockerd >>"$log" 2>&1 </dev/null &
fi

deadline=$((SECONDS + timeout_s))
until up; do
    if [ $SECONDS -ge $deadline ]; then
        echo "dockerd did not answer within ${timeout_s}s; last lines of $log:" >&2
        tail -n 40 "$log" >&2 || true
        exit 1
    fi
    sleep 0.5
done
