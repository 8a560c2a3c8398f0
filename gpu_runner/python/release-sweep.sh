#!/usr/bin/env bash
# Which vLLM releases a gateway can talk to (docs/runner/releases.md "Engine
# releases"): `gpu-runner release-sweep` with the mock engine playing each
# release that has a schema table (0.22.0 ... 0.34.0; the gateway's own
# first, the baseline), readiness and golden/gateway's length_finish,
# eos_finish and logprobs_top_k per release. Installs (or reuses) the
# gateway's venv, writes golden/gateway/reports/releases-<gateway>.json
# (the scoreboard's "Engine releases": gpu_runner/python/score-smg.sh
# regenerates docs/reports/scoreboard.md from it) and prints the time it took.
# Not part of `cargo test`: it needs the gateways' venvs.
#
# Usage: gpu_runner/python/release-sweep.sh GATEWAY [release-sweep options]
#   GATEWAY: smg (SMG 1.13.0) or a named gateway of gpu_runner/named-gateways.json
#            (vllm-rs-0.33.0: vLLM 0.33.0's Rust frontend; its venv is set up
#            with the line's setup command)
#   e.g. --engine-release 0.25.1 (only that release, and the baseline),
#        --expect golden/gateway/reports/releases-smg-1.13.0.json (exit 1
#        when a release swept has another outcome than the committed report),
#        --report-json PATH (default: the committed report's path).
# Measured on 2 CPU cores (every release): smg about 90 s, vllm-rs-0.33.0
# about 7 min (each of its starts loads vLLM's Python side first).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
gw=${1:?usage: $0 GATEWAY [release-sweep options]}
shift
case "$gw" in
  smg)
    gpu_runner/python/setup-smg.sh >/dev/null
    name=smg-1.13.0 ;;
  *)
    setup=$(python3 -c 'import json, sys
print(next((g["setup"] for g in json.load(open("gpu_runner/named-gateways.json"))["gateways"] if g["name"] == sys.argv[1]), ""))' "$gw")
    [ -n "$setup" ] || { echo "unknown gateway $gw: smg or a name of gpu_runner/named-gateways.json" >&2; exit 2; }
    $setup >/dev/null
    name=$gw ;;
esac
report=golden/gateway/reports/releases-$name.json
for a in "$@"; do
  if [ "$a" = "--report-json" ]; then report=; fi
done
cargo build -q -p gpu-runner
bin=${CARGO_TARGET_DIR:-$root/target}/debug/gpu-runner
t0=$(date +%s)
rc=0
"$bin" release-sweep --gateway "$gw" ${report:+--report-json "$report"} "$@" || rc=$?
echo "release sweep of $name: $(( $(date +%s) - t0 )) s${report:+; report: $report}"
# No gateway process may outlive the sweep.
if pgrep -x 'smg::router' >/dev/null || pgrep -f 'bin/vllm serve' >/dev/null; then
  echo "a gateway process is still running" >&2; rc=1
fi
exit $rc
