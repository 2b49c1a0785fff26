#!/usr/bin/env bash
# Installs what the fault harness (compat-tests/cluster) needs to put brokers in network
# namespaces and cut links between them: iproute2 (`ip netns`, veth, bridges) and
# iptables, from Debian's packages, if missing. Idempotent. Without root it only reports
# (the fault tests then skip, saying why).
set -euo pipefail

missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "netns.sh: missing ${missing[*]} and cannot install without root and apt-get" >&2
        exit 0
    fi
fi
echo "netns: $(ip -V) / $(iptables -V)"
