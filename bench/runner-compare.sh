#!/usr/bin/env bash
# The gateway's output loop (gpu-runner transport) against vLLM's Python loop
# (pyzmq PULL + MsgpackDecoder + dict demultiplex) on the same traffic from
# the same pyzmq PUSH source; prints a Markdown table. docs/bench.md.
# Sets up the vLLM 0.32.0 venv (cached under ~/.cache) if needed.
# Options go to `bench/runner_loop.py compare` (--rounds, --outputs,
# --shapes, --requests, --ceiling).
set -euo pipefail
cd "$(dirname "$0")/.."
golden/generate/setup-venvs.sh 0.32.0 >&2
VENV=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}/vllm-0.32.0
# The bench binary's path, from cargo's own report of it.
BIN=$(cargo bench -q -p gpu-runner --bench runner_loop --no-run --message-format=json |
  "$VENV/bin/python" -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "runner_loop" and m.get("executable"):
        print(m["executable"])')
[ -x "$BIN" ] || { echo "runner-compare.sh: no runner_loop bench binary" >&2; exit 1; }
exec "$VENV/bin/python" bench/runner_loop.py compare --rust "$BIN" "$@"
