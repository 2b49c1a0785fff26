#!/usr/bin/env bash
# runnel as other projects' test broker: the container image under testcontainers-rs, the
# embedded broker and the subprocess mode, each driven by the rdkafka crate (and the
# container by kafka-python too). Idempotent; needs root on Debian 12 and no registry
# beyond the package registries:
#   1. dockerd up (docker/ensure-dockerd.sh installs Debian's docker.io when missing),
#   2. the kafka-python venv (compat-tests/setup/python.sh),
#   3. the image runnel:dev (docker/build-image.sh: local base image, host-built binary),
#   4. cargo test in this package (its own workspace: rdkafka/testcontainers stay out of
#      the main crate's build). Extra arguments go to `cargo test`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

echo "== docker engine"
bash "$repo/docker/ensure-dockerd.sh"
echo "== python clients"
bash "$repo/compat-tests/setup/python.sh" >/dev/null
echo "== image runnel:dev"
bash "$repo/docker/build-image.sh"
echo "== cargo test (compat-tests/rust: container, embedded, subprocess)"
cd "$here"
# The subprocess tests run the release binary that build-image.sh just built.
export RUNNEL_BIN="${RUNNEL_BIN:-$repo/target/release/runnel}"
cargo test --locked "$@"
