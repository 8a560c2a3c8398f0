#!/usr/bin/env bash
# Regenerate the TokenSpeed golden tree (message cases, then the
# tokenspeed_translation cases of translation/) and its schema dump, and check them.
# Needs golden/generate/setup-tokenspeed.sh (run it first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
TS_ROOT=${TS_ROOT:-$HOME/.cache/engine-conformance/tokenspeed}
dir=$TS_ROOT/tokenspeed-0.1.1
[ -f "$dir/.complete" ] || { echo "missing TokenSpeed install: run $here/setup-tokenspeed.sh" >&2; exit 1; }
(cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$dir/site" "$VENV_ROOT/vllm-0.33.0/bin/python" \
    golden/generate/tokenspeed/generate_tokenspeed.py --out golden/tokenspeed/0.1.1 \
    --schema-dump golden/generate/schema/tokenspeed-0.1.1.json --check)
(cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$dir/site" "$VENV_ROOT/vllm-0.33.0/bin/python" \
    golden/generate/tokenspeed/generate_translation.py --out golden/tokenspeed/0.1.1/translation)
(cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$dir/site" "$VENV_ROOT/vllm-0.33.0/bin/python" \
    golden/generate/tokenspeed/generate_translation.py --out golden/tokenspeed/0.1.1/translation --check)
