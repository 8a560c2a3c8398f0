#!/usr/bin/env bash
# The codec's speed regression check (CI; docs/bench.md, "Regression check"):
#  (a) instructions per call of the typed encode/decode paths of the bench
#      cases under callgrind, against the committed bench/insn-baseline.txt:
#      fails above +3% (bench/insn_check.py; installs valgrind if root, else
#      fails saying it is missing);
#  (b) criterion's wall-clock times of the same paths against the first run
#      on this machine, kept under $HOME/.cache (delete the folder to start
#      again): every change printed, and listed at the end when a path's
#      whole 95% interval of change lies above +50%. It fails on that only
#      with CRITERION_FAIL=1 (a dedicated, quiet machine): on a shared one
#      every path moved by +55% to +170% at once between two runs of the
#      same binary, so the wall-clock gate would flake; (a) is the gate.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "-- instruction counts against bench/insn-baseline.txt"
python3 bench/test_insn_check.py 2>&1 | tail -1
python3 bench/insn_check.py

echo "-- criterion against this machine's baseline"
home=${CRITERION_BASELINE_DIR:-$HOME/.cache/engine-conformance/criterion-baseline}
mkdir -p "$home"
filter='^(typed_encode/(checked/)?[a-z0-9_]+|typed_decode/request_512_tokens|hot_decode/[a-z0-9_]+)$'
if compgen -G "$home/*/*/ci" >/dev/null; then
  mode=(--baseline-lenient ci)
  echo "comparing with the baseline saved in $home"
else
  mode=(--save-baseline ci)
  echo "no baseline in $home: this run saves it"
fi
stamp=$(mktemp)
CRITERION_HOME=$home cargo bench -q -p engine-protocol --bench codec -- "$filter" \
  --warm-up-time 0.5 --measurement-time 1 --sample-size 30 --noplot "${mode[@]}" 2>&1 \
  | grep -E '^[a-z_0-9/]+( |$)|^ +time:|regressed|improved|No change|within noise' || true
python3 - "$home" "$stamp" <<'PY'
import json, os, sys
home, stamp = sys.argv[1], os.path.getmtime(sys.argv[2])
failed = []
for d, _, files in os.walk(home):
    if os.path.basename(d) != "change" or "estimates.json" not in files:
        continue
    path = os.path.join(d, "estimates.json")
    if os.path.getmtime(path) < stamp:
        continue  # from an earlier run, not compared this time
    bench = json.load(open(os.path.join(os.path.dirname(d), "new", "benchmark.json")))["full_id"]
    mean = json.load(open(path))["mean"]
    low, point = mean["confidence_interval"]["lower_bound"], mean["point_estimate"]
    if low > 0.5:
        failed.append(f"{bench}: {point:+.0%} against the baseline in {home} (95% interval from {low:+.0%})")
gate = os.environ.get("CRITERION_FAIL") == "1"
for f in failed:
    print(("wall-clock regression: " if gate else "wall-clock change (not a failure without CRITERION_FAIL=1): ") + f,
          file=sys.stderr)
sys.exit(1 if failed and gate else 0)
PY
rm -f "$stamp"
