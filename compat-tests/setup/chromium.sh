#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its WebDriver (packages `chromium` and
# `chromium-driver`) for test_web_console.py, if missing. Idempotent. Without root and
# apt-get it only reports (the test then skips, saying why).
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium chromium-driver fonts-dejavu-core >/dev/null
    else
        echo "chromium.sh: chromium/chromedriver missing and cannot install without root and apt-get" >&2
        exit 0
    fi
fi
echo "chromium: $(chromium --version 2>/dev/null | head -1); $(chromedriver --version 2>/dev/null | head -1)"
