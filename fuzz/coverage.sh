#!/usr/bin/env bash
# Source coverage of engine-protocol per fuzz target, over the committed
# corpus (fuzz/corpus/<target>/ and fuzz/regressions/<target>/), and the
# table of fuzz/README.md "Coverage per target".
#
#   fuzz/coverage.sh [--update-readme] [TARGET...]
#
# With no TARGET, every target of `cargo fuzz list`. Per target:
# `cargo fuzz coverage -s none` (an instrumented build, no sanitizer, in
# fuzz/target/<triple>/coverage/), the profile in fuzz/coverage/<target>/,
# then `llvm-cov export` over protocol/src (std, dependencies, testkit and
# this crate ignored). Prints the markdown table of coverage_table.py:
# per target, region and line coverage of its decoder files and the
# functions of those files it never runs (all listed, with file and line,
# in fuzz/coverage/<target>/uncovered.txt), then the functions no target
# runs. With --update-readme the table between the `coverage-table`
# markers of fuzz/README.md is replaced.
#
# Needs llvm-profdata and llvm-cov of the nightly toolchain's LLVM:
# `rustup component add llvm-tools-preview --toolchain nightly` (done here
# when missing). Runs under `nice -n 10`; COVERAGE_JOBS (default 1) is the
# number of processes replaying each corpus.
set -euo pipefail
cd "$(dirname "$0")"

update_readme=0
if [ "${1:-}" = "--update-readme" ]; then
  update_readme=1
  shift
fi

triple=x86_64-unknown-linux-gnu
llvm_bin="$(rustc +nightly --print sysroot)/lib/rustlib/$triple/bin"
if [ ! -x "$llvm_bin/llvm-cov" ]; then
  rustup component add llvm-tools-preview --toolchain nightly
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

mkdir -p coverage
for t in "${targets[@]}"; do
  corpora=("corpus/$t")
  if [ -d "regressions/$t" ]; then
    corpora+=("regressions/$t")
  fi
  inputs=$(find "${corpora[@]}" -maxdepth 1 -type f | wc -l)
  echo "== $t: $inputs inputs" >&2
  start=$SECONDS
  nice -n 10 cargo +nightly fuzz coverage -s none --jobs "${COVERAGE_JOBS:-1}" "$t" "${corpora[@]}" \
    >"coverage/$t.log" 2>&1 || {
    mkdir -p "coverage/$t"
    tail -20 "coverage/$t.log" >&2
    exit 1
  }
  mv "coverage/$t.log" "coverage/$t/run.log"
  bin="target/$triple/coverage/$triple/release/$t"
  "$llvm_bin/llvm-cov" export -format=text -skip-expansions \
    -instr-profile="coverage/$t/coverage.profdata" "$bin" \
    -ignore-filename-regex='/rustc/|/\.cargo/registry/' \
    >"coverage/$t/export.json"
  python3 coverage_table.py "$t" "coverage/$t/export.json" "coverage/$t" "$inputs"
  rm "coverage/$t/export.json"
  echo "   $((SECONDS - start)) s" >&2
done

table=$(python3 coverage_table.py --table "${targets[@]/#/coverage/}")
echo "$table"

if [ "$update_readme" -eq 1 ]; then
  python3 - "$table" <<'PY'
import sys
table = sys.argv[1]
path = "README.md"
text = open(path).read()
begin, end = "<!-- coverage-table:begin -->", "<!-- coverage-table:end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} ... {end} markers")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(f"{head}{begin}\n{table}\n{end}{tail}")
PY
  echo "fuzz/README.md: coverage table updated" >&2
fi
