#!/usr/bin/env bash
# Runs every test: Rust unit + in-process integration tests, then the compatibility
# suite with real Kafka clients against a real runnel process (compat-tests/run.sh).
# Installs what it needs (Debian packages, Kafka jars, Python/Go modules, librdkafka's
# test suite) idempotently, caching under ~/.cache/runnel.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean CI clone gains nothing from incremental compilation, and its cache is gigabytes.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

echo "== cargo fmt --check, clippy"
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
# The separate workspaces that depend on runnel by path must have lock files that still
# match runnel's dependencies (run `cargo metadata` in them after changing Cargo.toml).
for ws in compat-tests/rust fuzz; do
  cargo metadata --locked --format-version 1 --manifest-path "$ws/Cargo.toml" >/dev/null \
    || { echo "$ws/Cargo.lock is out of date with runnel's Cargo.toml"; exit 1; }
done

echo "== cargo test (unit + integration)"
cargo build --locked --bins
cargo test --locked --all-targets 2>&1 | tee /tmp/runnel-cargo-test.log

echo "== compatibility suite (real clients against a real runnel process)"
bash compat-tests/run.sh

echo "== benchmark harness smoke (side by side with Kafka 4.4; reports, never fails on a number)"
bash bench/run.sh --smoke
