#!/usr/bin/env bash
# Ours vs vLLM's own msgspec codec on the same bytes; prints a Markdown table
# per release (decode and encode; for output batches also the fast decoder
# `engine_protocol::hot::decode_outputs`): vLLM 0.33.0's rows (a request,
# output batches) and vLLM 0.34.0's (requests whose prompt is an int32
# array, inline and in an aux frame, 70 000 tokens included), each timed
# with that release's own vLLM. Sets up both venvs (cached under ~/.cache)
# if needed. Builds into $CARGO_TARGET_DIR (default target/). Options go to
# bench/msgspec_compare.py: --repeats N, --rounds N, --vllm-rust BIN (vLLM
# 0.33.0's Rust client codec, run as `BIN bench CASE.json...`, on the
# 0.33.0 rows). RELEASES="0.34.0" bench/compare.sh times one release.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASES=${RELEASES:-0.33.0 0.34.0}
for v in $RELEASES; do golden/generate/setup-venvs.sh "$v" >&2; done
TGT=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p conformance
cargo build --release -q -p conformance --no-default-features --target-dir "$TGT/sysalloc"
for v in $RELEASES; do
  VENV=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}/vllm-$v
  args=("$@")
  if [ "$v" != 0.33.0 ]; then
    # vLLM's Rust client codec is 0.33.0's: it has no 0.34.0 rows.
    args=()
    skip=0
    for a in "$@"; do
      if [ "$skip" = 1 ]; then skip=0; continue; fi
      case "$a" in --vllm-rust) skip=1 ;; --vllm-rust=*) ;; *) args+=("$a") ;; esac
    done
  fi
  echo "## vLLM $v"
  echo
  "$VENV/bin/python" bench/msgspec_compare.py --version "$v" \
      --conformance "$TGT/release/conformance" --conformance-sysalloc "$TGT/sysalloc/release/conformance" "${args[@]}"
  echo
done
