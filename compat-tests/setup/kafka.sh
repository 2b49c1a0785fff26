#!/usr/bin/env bash
# Fetches the Apache Kafka jars pinned in compat-tests/kafka/pom.xml (the reference broker
# and the CLI tools) into ${RUNNEL_CACHE:-~/.cache/runnel}/kafka-<version>/libs.
#
# Idempotent: a stamp file records the checksum of the pom that produced the libs; when
# it matches, nothing is downloaded. Java 17+ and Maven are installed from Debian's
# packages only if missing. Prints the libs directory on success.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="$here/../kafka/pom.xml"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
cache="${RUNNEL_CACHE:-$HOME/.cache/runnel}"
home="$cache/kafka-$version"
libs="$home/libs"
stamp="$home/.complete"

apt_updated=""
apt_install() {
    if [ -z "$apt_updated" ]; then
        apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v java >/dev/null || apt_install openjdk-17-jre-headless
command -v mvn >/dev/null || apt_install maven

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
        && [ -f "$libs/kafka_2.13-$version.jar" ] && [ -f "$libs/kafka-tools-$version.jar" ]; then
    echo "$libs"
    exit 0
fi

mkdir -p "$home"
tmp="$(mktemp -d "$home/libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetching Apache Kafka $version jars into $libs" >&2
start=$(date +%s)
mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" >&2
# Swap the finished directory in whole, so an interrupted run never looks complete.
rm -rf "$libs"
mv "$tmp" "$libs"
trap - EXIT
echo "$want" > "$stamp"
echo "fetched $(ls "$libs" | wc -l) jars in $(( $(date +%s) - start ))s" >&2
echo "$libs"
