#!/usr/bin/env bash
# Ours vs vLLM's own msgspec codec on the same bytes; prints a Markdown table
# (decode and encode; for output batches also the fast decoder
# `engine_protocol::hot::decode_outputs`). Sets up the vLLM 0.33.0 venv
# (cached under ~/.cache) if needed. Builds into $CARGO_TARGET_DIR (default
# target/). Options go to bench/msgspec_compare.py: --repeats N, --rounds N,
# --vllm-rust BIN (vLLM's Rust client codec, run as `BIN bench CASE.json...`).
set -euo pipefail
cd "$(dirname "$0")/.."
golden/generate/setup-venvs.sh 0.33.0 >&2
TGT=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p conformance
cargo build --release -q -p conformance --no-default-features --target-dir "$TGT/sysalloc"
VENV=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}/vllm-0.33.0
exec "$VENV/bin/python" bench/msgspec_compare.py \
    --conformance "$TGT/release/conformance" --conformance-sysalloc "$TGT/sysalloc/release/conformance" "$@"
