#!/usr/bin/env bash
# Installs Debian's Prometheus server and promtool (package `prometheus`) for
# test_prometheus.py, if missing. Idempotent. Without root and apt-get it only reports
# (the tests then skip, saying why). The package's own service is not started: the test
# runs its own server with its own configuration.
set -euo pipefail

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        # policy-rc.d keeps the package's post-install from starting a server on :9090.
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
            trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
        echo "prometheus.sh: prometheus/promtool missing and cannot install without root and apt-get" >&2
        exit 0
    fi
fi
echo "prometheus: $(prometheus --version 2>&1 | head -1)"
