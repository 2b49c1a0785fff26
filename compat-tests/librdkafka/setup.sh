#!/usr/bin/env bash
#
# Fetch and build librdkafka's own regression test suite (tests/test-runner).
#
# librdkafka's sources come from the node-rdkafka npm package, which vendors a
# full librdkafka tree (including tests/) under deps/librdkafka. Everything is
# downloaded at test time and cached under ${RUNNEL_CACHE:-$HOME/.cache/runnel};
# nothing downloaded is ever written into the repository.
#
# Idempotent: a second run with the same pin and flags only checks the stamp.
# Needs (installed here via apt-get when missing): gcc/g++, make, pkg-config,
# python3, perl, the -dev packages of the optional codecs/security libraries and
# rapidjson-dev (without it the tests that check statistics JSON skip themselves).
#
# Environment:
#   RUNNEL_CACHE        cache root (default ~/.cache/runnel)
#   NODE_RDKAFKA_VERSION  npm package version to use (default 3.6.1, pinned by sha256)
#   JOBS                make parallelism (default 2)
#   SKIP_APT=1          never call apt-get (fail instead if something is missing)

set -euo pipefail

NODE_RDKAFKA_VERSION="${NODE_RDKAFKA_VERSION:-3.6.1}"
# sha256 of node-rdkafka-3.6.1.tgz (ships librdkafka 2.12.0). Checked only for the
# default version; set NODE_RDKAFKA_SHA256= (empty) to skip when overriding.
if [[ "${NODE_RDKAFKA_VERSION}" == "3.6.1" ]]; then
    NODE_RDKAFKA_SHA256="${NODE_RDKAFKA_SHA256-148f7e7b65c510314c70762d8f1be052c8fe1fdf03a128e6c78083a729a57a30}"
else
    NODE_RDKAFKA_SHA256="${NODE_RDKAFKA_SHA256-}"
fi
JOBS="${JOBS:-2}"
CACHE="${RUNNEL_CACHE:-$HOME/.cache/runnel}/librdkafka"
PKG_DIR="${CACHE}/node-rdkafka-${NODE_RDKAFKA_VERSION}"
SRC_DIR="${PKG_DIR}/package/deps/librdkafka"
CONFIGURE_FLAGS=(--no-download --disable-debug-symbols)
STAMP="${SRC_DIR}/.runnel-build-stamp"
STAMP_TEXT="node-rdkafka=${NODE_RDKAFKA_VERSION} flags=${CONFIGURE_FLAGS[*]} v2"

log() { printf '[librdkafka-setup] %s\n' "$*" >&2; }

if [[ -f "${STAMP}" && "$(cat "${STAMP}")" == "${STAMP_TEXT}" \
      && -x "${SRC_DIR}/tests/test-runner" ]]; then
    log "up to date: ${SRC_DIR}/tests/test-runner"
    echo "${SRC_DIR}"
    exit 0
fi

# ---------------------------------------------------------------- build deps
DEB_PKGS=(gcc g++ make pkg-config perl python3 libssl-dev zlib1g-dev
          libzstd-dev liblz4-dev libsasl2-dev libcurl4-openssl-dev
          rapidjson-dev)
missing=()
for p in "${DEB_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        # python3 may come from pyenv etc. rather than Debian's package
        if [[ "$p" == python3 ]] && command -v python3 >/dev/null; then continue; fi
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    if [[ "${SKIP_APT:-0}" == 1 ]]; then
        log "missing Debian packages: ${missing[*]} (SKIP_APT=1)"; exit 1
    fi
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v npm >/dev/null || { log "npm is required"; exit 1; }

# ------------------------------------------------------------------- fetch
mkdir -p "${CACHE}"
TGZ="${CACHE}/node-rdkafka-${NODE_RDKAFKA_VERSION}.tgz"
if [[ ! -s "${TGZ}" ]]; then
    log "npm pack node-rdkafka@${NODE_RDKAFKA_VERSION}"
    tmp="$(mktemp -d "${CACHE}/pack.XXXXXX")"
    (cd "${tmp}" && npm pack --silent "node-rdkafka@${NODE_RDKAFKA_VERSION}" >/dev/null)
    mv "${tmp}/node-rdkafka-${NODE_RDKAFKA_VERSION}.tgz" "${TGZ}"
    rmdir "${tmp}"
fi
if [[ -n "${NODE_RDKAFKA_SHA256}" ]]; then
    got="$(sha256sum "${TGZ}" | awk '{print $1}')"
    if [[ "${got}" != "${NODE_RDKAFKA_SHA256}" ]]; then
        log "sha256 mismatch for ${TGZ}: got ${got}"; rm -f "${TGZ}"; exit 1
    fi
fi

if [[ ! -f "${SRC_DIR}/tests/test.c" ]]; then
    log "unpacking into ${PKG_DIR}"
    rm -rf "${PKG_DIR}.tmp" "${PKG_DIR}"
    mkdir -p "${PKG_DIR}.tmp"
    tar xzf "${TGZ}" -C "${PKG_DIR}.tmp"
    mv "${PKG_DIR}.tmp" "${PKG_DIR}"
fi

# ------------------------------------------------------------------- build
start=$(date +%s)
cd "${SRC_DIR}"
chmod +x configure tests/*.sh tests/*.py 2>/dev/null || true
log "configure ${CONFIGURE_FLAGS[*]}"
./configure "${CONFIGURE_FLAGS[@]}" > "${CACHE}/configure.log" 2>&1 \
    || { tail -30 "${CACHE}/configure.log"; exit 1; }
log "make -j${JOBS} libs"
make -j"${JOBS}" libs > "${CACHE}/build.log" 2>&1 \
    || { tail -40 "${CACHE}/build.log"; exit 1; }
log "make -j${JOBS} -C tests build"
make -j"${JOBS}" -C tests build >> "${CACHE}/build.log" 2>&1 \
    || { tail -40 "${CACHE}/build.log"; exit 1; }
[[ -x tests/test-runner ]] || { log "tests/test-runner was not built"; exit 1; }
end=$(date +%s)
log "built in $((end - start)) s (logs: ${CACHE}/configure.log, build.log)"
echo "$((end - start))" > "${CACHE}/build-seconds"
echo "${STAMP_TEXT}" > "${STAMP}"
echo "${SRC_DIR}"
