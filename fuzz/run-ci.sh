#!/usr/bin/env bash
# CI: checks that the committed seed corpus is what `write-seeds` writes,
# runs the stable corpus and regression tests of the fuzz crate, builds
# every fuzz target and runs each for a short fixed time (default 30 s):
# every [[bin]] of fuzz/Cargo.toml (`cargo fuzz list`), the vLLM targets
# (the differential ones hot_outputs and hot_request included) and the
# TokenSpeed ones (tokenspeed_request, tokenspeed_sampling_params,
# tokenspeed_abort, tokenspeed_outputs, tokenspeed_handshake,
# tokenspeed_ready_response) alike.
#
#   fuzz/run-ci.sh [SECONDS_PER_TARGET]
#
# Exits non-zero on a stale corpus, a failing test, or any crash, leak,
# timeout or out-of-memory input. Longer scheduled runs: run-campaign.sh.
set -euo pipefail
cd "$(dirname "$0")"

cargo run -q --release --example write-seeds -- --check
cargo test -q --release
exec ./run-campaign.sh "${1:-30}"
