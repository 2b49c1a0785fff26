#!/usr/bin/env bash
# Installs kcat (librdkafka's command-line client) from Debian's package if it is missing.
# Idempotent; prints kcat's version line.
set -euo pipefail

if ! command -v kcat >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi
kcat -V 2>&1 | grep -m1 "^Version"
