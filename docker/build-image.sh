#!/usr/bin/env bash
# Builds the runnel image as ${RUNNEL_IMAGE:-runnel:dev}:
#   1. the base image (docker/base-image.sh: a local debootstrap, no registry pull),
#   2. the runnel binary on the host (cargo build --release --locked),
#   3. `docker build` with the repository as context (.dockerignore sends only the binary
#      and the entrypoint and health check scripts).
# Needs a running dockerd (docker/ensure-dockerd.sh). Idempotent; docker's layer cache
# makes a rebuild with an unchanged binary take about a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
image="${RUNNEL_IMAGE:-runnel:dev}"

bash "$here/base-image.sh"
(cd "$repo" && cargo build --release --locked --bin runnel)
# The Dockerfile copies target/release/runnel of the repository. When CARGO_TARGET_DIR
# puts the build elsewhere (a worktree with a target dir of its own), copy it there first.
built="$(cd "$repo" && realpath -m "${CARGO_TARGET_DIR:-target}")/release/runnel"
if [ ! "$built" -ef "$repo/target/release/runnel" ]; then
    mkdir -p "$repo/target/release"
    cp "$built" "$repo/target/release/runnel"
fi
# BuildKit when the buildx plugin is there; otherwise the classic builder, explicitly, so
# that a newer CLI does not refuse for want of buildx (Debian 12's docker.io has none).
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
docker build -q -t "$image" "$repo" >/dev/null
echo "built $image" >&2
