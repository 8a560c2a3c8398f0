#!/usr/bin/env bash
# Extracts (or reuses) TokenSpeed's Python tree at git commit 57b49061
# (2026-08-03, "add msgpack ZMQ mode for direct SMG scheduler drive"), the
# first commit with the msgpack wire and the one SMG's pinned 08-03 vectors
# were captured from, for the second TokenSpeed golden version
# (golden/tokenspeed/git-57b49061/). No wheel of it was ever published: PyPI
# has 0.1.0 (no msgpack wire) and 0.1.1 (later wire), so the code comes from
# TokenSpeed's own repository, pinned by commit and by the git tree hash of
# python/tokenspeed, and cached outside the repository:
#   $TS_ROOT/tokenspeed-git-57b49061/site   python/tokenspeed at that commit
# It runs on the vllm-0.33.0 venv's interpreter under the same kernel-package
# shim as 0.1.1 (golden/generate/tokenspeed/ts_shim.py).
# Usage: golden/generate/setup-tokenspeed-git.sh [REPO]
#   REPO: a clone of https://github.com/lightseekorg/tokenspeed holding the
#   commit (a bare git directory is fine); default: clone it into the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
TS_ROOT=${TS_ROOT:-$HOME/.cache/engine-conformance/tokenspeed}
COMMIT=57b49061a1aa258a7c27d8e25f32beb91a4ed896
TREE=3772b7a7ad05a79161c6edae64991a8509d5e82d   # git rev-parse $COMMIT:python/tokenspeed
dir=$TS_ROOT/tokenspeed-git-57b49061
py=$VENV_ROOT/vllm-0.33.0/bin/python

[ -f "$VENV_ROOT/vllm-0.33.0/.complete" ] || "$here/setup-venvs.sh" 0.33.0

if [ -f "$dir/.complete" ]; then
  echo "reusing $dir"
else
  repo=${1:-$TS_ROOT/tokenspeed.git}
  if [ ! -d "$repo" ]; then
    git clone -q --bare https://github.com/lightseekorg/tokenspeed "$repo"
  fi
  got=$(git -C "$repo" rev-parse "$COMMIT:python/tokenspeed")
  if [ "$got" != "$TREE" ]; then
    echo "error: $repo: tree of $COMMIT:python/tokenspeed is $got, expected $TREE" >&2
    exit 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir/site"
  git -C "$repo" archive "$COMMIT" python/tokenspeed | tar -x -C "$dir/site" --strip-components=1
  # The generator names the version after this marker (tsenv.Env.version).
  echo "$COMMIT" > "$dir/site/TOKENSPEED_GIT_COMMIT"
  touch "$dir/.complete"
fi
# The import check: TokenSpeed's wire modules load under the shim.
PYTHONPATH="$dir/site:$here/tokenspeed:$here" "$py" -c '
import ts_shim; ts_shim.install()
import tokenspeed.runtime.engine.zmq_msgpack, tokenspeed.runtime.engine.io_struct as io
from tokenspeed.version import __version__ as v
assert v == "0.1.0", v
ts_shim.assert_untouched()
print("tokenspeed git 57b49061 (version.py says", v + ") wire modules import (kernel packages stubbed)")'
