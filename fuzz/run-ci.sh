#!/usr/bin/env bash
# CI: for every cargo-fuzz crate (fuzz/crates.sh: fuzz/, the codec's
# decoders; gpu_runner/fuzz/, the testee protocol and the scenario and
# expectations files), checks that the committed seed corpus is what its
# `write-seeds` writes and runs its stable tests; then builds every fuzz
# target and runs each for a short fixed time (default 30 s): every [[bin]]
# of every crate (`cargo fuzz list`), the vLLM targets (the differential
# ones hot_outputs and hot_request included), the TokenSpeed ones
# (tokenspeed_request, tokenspeed_sampling_params, tokenspeed_abort,
# tokenspeed_outputs, tokenspeed_handshake, tokenspeed_ready_response) and
# gpu_runner/fuzz's (testee_frames, scenario_file, expectations_file)
# alike.
#
#   fuzz/run-ci.sh [SECONDS_PER_TARGET]
#
# Exits non-zero on a stale corpus, a failing test, or any crash, leak,
# timeout or out-of-memory input. Longer scheduled runs: run-campaign.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. fuzz/crates.sh

mapfile -t crates < <(fuzz_crates)
for c in "${crates[@]}"; do
  echo "== $c: seed check and stable tests"
  opts=$(fuzz_stable_cargo "$c")
  read -r -a stable <<<"$opts"
  (
    cd "$c"
    cargo run -q "${stable[@]}" --example write-seeds -- --check
    cargo test -q "${stable[@]}"
  )
done
exec fuzz/run-campaign.sh "${1:-30}"
