#!/usr/bin/env bash
# Ours vs vLLM's own msgspec codec on the same bytes; prints a Markdown table.
# Sets up the vLLM 0.33.0 venv (cached under ~/.cache) if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
golden/generate/setup-venvs.sh 0.33.0 >&2
cargo build --release -q -p conformance
cargo build --release -q -p conformance --no-default-features --target-dir target/sysalloc
VENV=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}/vllm-0.33.0
exec "$VENV/bin/python" bench/msgspec_compare.py "$@"
