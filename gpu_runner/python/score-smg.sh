#!/usr/bin/env bash
# The live SMG run: installs (or reuses) the smg 1.13.0 venv, scores SMG with
# `gpu-runner gateway` (the suite plays the engine; every scenario of
# golden/gateway/, engine faults and streams included), and regenerates
# docs/reports/scoreboard.md from the JSON report. Not part of `cargo test`: it needs
# the wheel. Exit code: the gateway run's (0 = no unexpected result).
# Usage: gpu_runner/python/score-smg.sh [REPORT.json]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
report=${1:-golden/gateway/reports/smg-1.13.0.json}
mkdir -p "$(dirname "$report")"
gpu_runner/python/setup-smg.sh
cargo build -q -p gpu-runner
bin=${CARGO_TARGET_DIR:-$root/target}/debug/gpu-runner
rc=0
"$bin" gateway --gateway smg \
  --expectations golden/gateway/expectations/smg-1.13.0.txt \
  --report-json "$report" || rc=$?
# With the reference run of vLLM's own frontend (kept, not rerun here:
# docs/runner/gateway.md "The reference run"), and the engine release sweeps
# (kept, not rerun here: gpu_runner/python/release-sweep.sh).
# The generation-config defaults on a model that sets them (golden/instruct;
# SMG reads only its tokenizer and configs, no weights).
"$bin" gateway --gateway smg --model golden/instruct --only generation_config_defaults \
  --expectations golden/gateway/expectations/smg-1.13.0-instruct.txt \
  --report-json "target/gateway-smg-1.13.0-instruct.json" || rc=$?
gpu_runner/python/scoreboard.sh
echo "report: $report; scoreboard: docs/reports/scoreboard.md (every report of golden/gateway/reports)"
# No gateway or engine process may outlive the run.
if pgrep -x 'smg::router' >/dev/null; then echo "an smg::router process is still running" >&2; rc=1; fi
exit $rc
