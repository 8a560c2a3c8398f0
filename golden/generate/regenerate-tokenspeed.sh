#!/usr/bin/env bash
# Regenerate the TokenSpeed golden trees and their schema dumps, and check
# them:
#   0.1.1         golden/tokenspeed/0.1.1 (message cases, then the
#                 tokenspeed_translation cases of translation/), from the wheel
#                 (golden/generate/setup-tokenspeed.sh installs it);
#   git-57b49061  golden/tokenspeed/git-57b49061 (message cases), from
#                 TokenSpeed's tree at that commit
#                 (golden/generate/setup-tokenspeed-git.sh extracts it).
# Usage: golden/generate/regenerate-tokenspeed.sh [0.1.1|git-57b49061|all]   (default all)
# A version whose install is missing is an error, not a skip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
TS_ROOT=${TS_ROOT:-$HOME/.cache/engine-conformance/tokenspeed}
py=$VENV_ROOT/vllm-0.33.0/bin/python
which=${1:-all}
case "$which" in
  0.1.1|git-57b49061|all) ;;
  *) echo "usage: $0 [0.1.1|git-57b49061|all]" >&2; exit 2 ;;
esac

need() {  # need DIR SETUP-SCRIPT
  [ -f "$1/.complete" ] || { echo "missing TokenSpeed install $1: run $here/$2" >&2; exit 1; }
}

messages() {  # messages VERSION SITE
  (cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$2" "$py" \
      golden/generate/tokenspeed/generate_tokenspeed.py --out "golden/tokenspeed/$1" \
      --schema-dump "golden/generate/schema/tokenspeed-$1.json" --check)
}

if [ "$which" = 0.1.1 ] || [ "$which" = all ]; then
  dir=$TS_ROOT/tokenspeed-0.1.1
  need "$dir" setup-tokenspeed.sh
  messages 0.1.1 "$dir/site"
  (cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$dir/site" "$py" \
      golden/generate/tokenspeed/generate_translation.py --out golden/tokenspeed/0.1.1/translation)
  (cd "$root" && PYTHONHASHSEED=0 PYTHONPATH="$dir/site" "$py" \
      golden/generate/tokenspeed/generate_translation.py --out golden/tokenspeed/0.1.1/translation --check)
fi
if [ "$which" = git-57b49061 ] || [ "$which" = all ]; then
  dir=$TS_ROOT/tokenspeed-git-57b49061
  need "$dir" setup-tokenspeed-git.sh
  messages git-57b49061 "$dir/site"
fi
