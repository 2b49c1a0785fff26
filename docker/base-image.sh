#!/usr/bin/env bash
# Builds the Dockerfile's base image locally, for machines that cannot pull from a
# container registry:
#   debootstrap --variant=minbase bookworm  (mirror read from this machine's apt sources)
#   → trimmed rootfs tarball cached under ${RUNNEL_CACHE:-~/.cache/runnel}/base-image/
#   → `docker import` as $RUNNEL_BASE_IMAGE (default debian:bookworm-slim, the Dockerfile's
#     default BASE_IMAGE).
# Idempotent: does nothing when the image exists; reuses the cached tarball when only the
# image is missing (e.g. a fresh dockerd). Needs root and a running dockerd.
set -euo pipefail

tag="${RUNNEL_BASE_IMAGE:-debian:bookworm-slim}"
suite=bookworm
cache="${RUNNEL_CACHE:-$HOME/.cache/runnel}/base-image"
tarball="$cache/$suite-minbase.tar"

if docker image inspect "$tag" >/dev/null 2>&1; then
    exit 0
fi

# The first `deb` source serving suite $suite (not -updates/-security): deb822 files
# (*.sources: Types/URIs/Suites stanzas) and one-line files (*.list: deb [opts] URI suite ...).
mirror_from_apt_sources() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$suite" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1; exit
                }
                types = ""; uris = ""; suites = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "types:"  { $1 = ""; types = $0 }
            tolower($1) == "uris:"   { $1 = ""; sub(/^ +/, ""); uris = $0 }
            tolower($1) == "suites:" { $1 = ""; suites = $0; gsub(/^ +| +$/, "", suites) }
            END { if (!found) flush() }
        ' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }'
    done
}

mkdir -p "$cache"
# Concurrent runs (several test sessions) build the tarball once.
exec 9>"$cache/.lock"
flock 9
if docker image inspect "$tag" >/dev/null 2>&1; then
    exit 0
fi

if [ ! -s "$tarball" ]; then
    mirror="$(mirror_from_apt_sources | head -n 1)"
    if [ -z "$mirror" ]; then
        echo "base-image: no 'deb ... $suite' source in /etc/apt/sources.list{,.d/*}" >&2
        exit 1
    fi
    if ! command -v debootstrap >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
            || { apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
    fi
    rootfs="$cache/rootfs.tmp"
    rm -rf "$rootfs"
    echo "base-image: debootstrap --variant=minbase $suite from $mirror" >&2
    debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
    # What -slim images drop: package caches and lists, docs, man pages, translations.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
           "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
           "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/tmp/* \
           "$rootfs"/debootstrap
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
fi

docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    "$tarball" "$tag" >/dev/null
echo "base-image: imported $tag" >&2
