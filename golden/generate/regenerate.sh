#!/usr/bin/env bash
# Regenerate schema dumps and golden trees (message kinds and the gateway
# kinds) for every supported vLLM version, and check them. Needs the venvs made by setup-venvs.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
versions=${*:-0.32.0 0.33.0}
for v in $versions; do
  py=$VENV_ROOT/vllm-$v/bin/python
  [ -f "$VENV_ROOT/vllm-$v/.complete" ] || { echo "missing venv for $v: run $here/setup-venvs.sh $v" >&2; exit 1; }
  (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$py" golden/generate/generate.py \
      --out golden/vllm/$v --schema-dump golden/generate/schema/vllm-$v.json)
  (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$py" golden/generate/check_cases.py golden/vllm/$v)
  # The gateway kinds (stop/, logprobs/, translation/) from vLLM's frontend.
  (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 "$py" \
      golden/generate/frontend/generate_frontend.py --out golden/vllm/$v)
done
