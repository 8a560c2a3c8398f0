#!/usr/bin/env bash
# Installs (or reuses) TokenSpeed 0.1.1's pure-Python wheel for the TokenSpeed
# golden generator. PyPI only, cached outside the repository:
#   $TS_ROOT/tokenspeed-0.1.1/site   the wheel, --no-deps, hash-pinned
# It runs on the vllm-0.33.0 venv's interpreter (msgspec, numpy, torch, pyzmq),
# which this script creates through setup-venvs.sh when it is missing and
# never modifies. The kernel packages TokenSpeed's imports reach for
# (tokenspeed_kernel, tokenspeed_triton) are stubbed by
# golden/generate/tokenspeed/ts_shim.py, not installed.
# Usage: golden/generate/setup-tokenspeed.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
TS_ROOT=${TS_ROOT:-$HOME/.cache/engine-conformance/tokenspeed}
dir=$TS_ROOT/tokenspeed-0.1.1
py=$VENV_ROOT/vllm-0.33.0/bin/python

[ -f "$VENV_ROOT/vllm-0.33.0/.complete" ] || "$here/setup-venvs.sh" 0.33.0

if [ -f "$dir/.complete" ]; then
  echo "reusing $dir"
else
  rm -rf "$dir"
  mkdir -p "$dir"
  "$py" -m pip install -q --no-deps --no-compile --require-hashes --target "$dir/site" \
    -r "$here/requirements-tokenspeed-0.1.1.txt"
  touch "$dir/.complete"
fi
# The import check: TokenSpeed's wire modules load under the shim.
PYTHONPATH="$dir/site:$here/tokenspeed:$here" "$py" -c '
import ts_shim; ts_shim.install()
import tokenspeed.runtime.engine.zmq_msgpack, tokenspeed.runtime.engine.io_struct as io
from tokenspeed.version import __version__ as v
assert v == "0.1.1", v
ts_shim.assert_untouched()
print("tokenspeed", v, "wire modules import (kernel packages stubbed)")'
