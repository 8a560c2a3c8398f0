#!/usr/bin/env bash
# The ClusterFuzzLite build (.clusterfuzzlite/build.sh) outside docker, and
# the checks on what it ships.
#
#   fuzz/check-cflite-build.sh                       # CI: self-test, build.sh, check $OUT
#   fuzz/check-cflite-build.sh seeds FUZZ_DIR TARGET...
#   fuzz/check-cflite-build.sh out OUT FUZZ_DIR TARGET...
#   fuzz/check-cflite-build.sh self-test
#
# With no argument (the CI step of .ci/run, after fuzz/run-ci.sh): the
# self-test, then build.sh with $SRC, $OUT and $WORK in a temporary folder
# ($SRC/engine-conformance links to this checkout) and the environment of
# OSS-Fuzz's base-builder-rust image as far as the build sees it
# (SANITIZER=address, FUZZING_ENGINE=libfuzzer, FUZZING_LANGUAGE=rust,
# ARCHITECTURE=x86_64, the nightly toolchain), then `out` on every target
# of every cargo-fuzz crate (fuzz/crates.sh: `cargo fuzz list` in each).
# RUSTFLAGS is left to cargo fuzz, as fuzz/run-ci.sh leaves it, so the
# build is fuzz/run-ci.sh's (<crate>/target) and costs a few seconds;
# inside the image `compile` adds `--cfg fuzzing -Zsanitizer=address
# -Cdebuginfo=1 -Cforce-frame-pointers` (fuzz/README.md).
#
# seeds: every TARGET has a folder FUZZ_DIR/corpus/TARGET with a file in it.
# out:   every TARGET has in OUT an executable TARGET, a TARGET_seed_corpus.zip
#        holding every file of FUZZ_DIR/corpus/TARGET and
#        FUZZ_DIR/regressions/TARGET, a TARGET.dict equal to the crate's
#        dictionary (the one FUZZ_DIR/*.dict) and a TARGET.options with a
#        [libfuzzer] section.
# self-test: each check fails on a tree that lacks what it checks.
set -euo pipefail
. "$(dirname "$0")/crates.sh"
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT

# seeds FUZZ_DIR TARGET...
check_seeds() {
  local fuzz_dir=$1 t f missing=()
  shift
  for t in "$@"; do
    if [ ! -d "$fuzz_dir/corpus/$t" ] || [ -z "$(find "$fuzz_dir/corpus/$t" -maxdepth 1 -type f -print -quit)" ]; then
      missing+=("$t")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    for f in "${missing[@]}"; do
      echo "fuzz target $f has no seed corpus: $fuzz_dir/corpus/$f/ is missing or empty (write-seeds writes it)" >&2
    done
    return 1
  fi
  echo "seed corpus: $# targets, each with seeds in $fuzz_dir/corpus/"
}

# out OUT FUZZ_DIR TARGET...
check_out() {
  local out=$1 fuzz_dir=$2 t bad=0 dict
  shift 2
  dict=$fuzz_dir/$(fuzz_dict "$fuzz_dir") || return 1
  for t in "$@"; do
    if [ ! -f "$out/$t" ] || [ ! -x "$out/$t" ]; then
      echo "$out/$t: the fuzz target's binary is missing or not executable" >&2
      bad=1
    fi
    if [ ! -f "$out/$t.dict" ] || ! cmp -s "$out/$t.dict" "$dict"; then
      echo "$out/$t.dict: missing or not $dict" >&2
      bad=1
    fi
    if [ ! -f "$out/$t.options" ] || ! grep -qx '\[libfuzzer\]' "$out/$t.options"; then
      echo "$out/$t.options: missing or without a [libfuzzer] section" >&2
      bad=1
    fi
    if ! python3 - "$out/${t}_seed_corpus.zip" "$fuzz_dir/corpus/$t" "$fuzz_dir/regressions/$t" <<'PY'; then
import os, sys, zipfile
out, seeds, regressions = sys.argv[1:]
want = {}
for folder, prefix in ((seeds, ""), (regressions, "regression-")):
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    want[prefix + name] = f.read()
try:
    with zipfile.ZipFile(out) as z:
        have = {i.filename: z.read(i) for i in z.infolist()}
except (OSError, zipfile.BadZipFile) as e:
    sys.exit(f"{out}: not a readable zip ({e})")
lost = sorted(n for n in want if have.get(n) != want[n])
if not want or lost:
    sys.exit(f"{out}: {len(lost)} of {len(want)} seeds of {seeds} (and {regressions}) missing or different, e.g. {lost[:3]}")
PY
      bad=1
    fi
  done
  if [ "$bad" -ne 0 ]; then
    return 1
  fi
  echo "$out: $# targets, each with its binary, seed zip, dictionary and options"
}

# Each check, on a tree lacking one thing, must fail and name it.
self_test() {
  local tmp log
  tmp=$(mktemp -d)
  cleanup+=("$tmp")
  log=$tmp/log
  mkdir -p "$tmp/fuzz/corpus/a" "$tmp/fuzz/corpus/b" "$tmp/fuzz/regressions/a" "$tmp/out"
  echo seed >"$tmp/fuzz/corpus/a/s1"
  echo finding >"$tmp/fuzz/regressions/a/f1"
  printf '%s\n' 'nil="\xc0"' >"$tmp/fuzz/engine.dict"
  expect_failure() {
    local what=$1 needle=$2
    shift 2
    if "$@" >"$log" 2>&1; then
      echo "self-test: $what passed, expected a failure" >&2
      return 1
    fi
    if ! grep -q -- "$needle" "$log"; then
      echo "self-test: $what failed without naming '$needle':" >&2
      cat "$log" >&2
      return 1
    fi
  }
  expect_failure "seeds with an empty corpus folder" "fuzz target b has no seed corpus" check_seeds "$tmp/fuzz" a b
  expect_failure "seeds with no corpus folder" "fuzz target c has no seed corpus" check_seeds "$tmp/fuzz" a c
  echo seed >"$tmp/fuzz/corpus/b/s1"
  check_seeds "$tmp/fuzz" a b >/dev/null

  printf '#!/bin/sh\n' >"$tmp/out/a"
  chmod +x "$tmp/out/a"
  cp "$tmp/fuzz/engine.dict" "$tmp/out/a.dict"
  printf '[libfuzzer]\nmax_len = 8192\n' >"$tmp/out/a.options"
  python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1], "w")
z.writestr("s1", "seed\n")
z.writestr("regression-f1", "finding\n")' "$tmp/out/a_seed_corpus.zip"
  check_out "$tmp/out" "$tmp/fuzz" a >/dev/null
  expect_failure "out without a target's binary" "$tmp/out/b: the fuzz target's binary" check_out "$tmp/out" "$tmp/fuzz" a b
  echo 'other="x"' >"$tmp/out/a.dict"
  expect_failure "out with a different dictionary" "a.dict: missing or not" check_out "$tmp/out" "$tmp/fuzz" a
  cp "$tmp/fuzz/engine.dict" "$tmp/out/a.dict"
  echo late >"$tmp/fuzz/regressions/a/f2"
  expect_failure "out with a regression input missing from the zip" "1 of 3 seeds" check_out "$tmp/out" "$tmp/fuzz" a
  rm "$tmp/fuzz/regressions/a/f2" "$tmp/out/a.options"
  expect_failure "out without options" "a.options: missing" check_out "$tmp/out" "$tmp/fuzz" a

  # A second crate ships its own dictionary, whatever its name.
  mkdir -p "$tmp/g/corpus/z" "$tmp/out2"
  echo seed >"$tmp/g/corpus/z/s1"
  printf '%s\n' 'dots="../"' >"$tmp/g/other.dict"
  printf '#!/bin/sh\n' >"$tmp/out2/z"
  chmod +x "$tmp/out2/z"
  cp "$tmp/fuzz/engine.dict" "$tmp/out2/z.dict"
  printf '[libfuzzer]\nmax_len = 16384\n' >"$tmp/out2/z.options"
  python3 -c 'import sys, zipfile
zipfile.ZipFile(sys.argv[1], "w").writestr("s1", "seed\n")' "$tmp/out2/z_seed_corpus.zip"
  expect_failure "out with another crate's dictionary" "z.dict: missing or not $tmp/g/other.dict" check_out "$tmp/out2" "$tmp/g" z
  cp "$tmp/g/other.dict" "$tmp/out2/z.dict"
  check_out "$tmp/out2" "$tmp/g" z >/dev/null
  cp "$tmp/g/other.dict" "$tmp/g/more.dict"
  expect_failure "out for a crate with two dictionaries" "expected exactly one \*.dict" check_out "$tmp/out2" "$tmp/g" z
  echo "self-test: the seed and \$OUT checks fail on what they check"
  rm -rf "$tmp"
}

ci() {
  cd "$(dirname "$0")/.."
  local repo tmp targets crates c n=0
  repo=$(pwd -P)
  self_test
  tmp=$(mktemp -d)
  cleanup+=("$tmp")
  mkdir -p "$tmp/src" "$tmp/out" "$tmp/work"
  ln -s "$repo" "$tmp/src/engine-conformance"
  cp .clusterfuzzlite/build.sh "$tmp/src/build.sh"
  (
    cd "$tmp/src/engine-conformance"
    env -u RUSTFLAGS SRC="$tmp/src" OUT="$tmp/out" WORK="$tmp/work" \
      SANITIZER=address FUZZING_ENGINE=libfuzzer FUZZING_LANGUAGE=rust ARCHITECTURE=x86_64 \
      RUSTUP_TOOLCHAIN=nightly bash -eu "$tmp/src/build.sh"
  )
  mapfile -t crates < <(fuzz_crates)
  for c in "${crates[@]}"; do
    mapfile -t targets < <(cd "$c" && cargo +nightly fuzz list)
    check_out "$tmp/out" "$c" "${targets[@]}"
    n=$((n + ${#targets[@]}))
  done
  # Nothing else: every binary in $OUT is a target of a crate.
  local shipped
  shipped=$(find "$tmp/out" -maxdepth 1 -type f -name '*_seed_corpus.zip' | wc -l)
  if [ "$shipped" -ne "$n" ]; then
    echo "$tmp/out: $shipped seed zips for $n targets" >&2
    return 1
  fi
  echo "\$OUT: $n targets of ${#crates[@]} crates, $(du -sh "$tmp/out" | cut -f1)"
}

case "${1:-ci}" in
  seeds)
    shift
    check_seeds "$@"
    ;;
  out)
    shift
    check_out "$@"
    ;;
  self-test) self_test ;;
  ci) ci ;;
  *)
    echo "usage: $0 [seeds FUZZ_DIR TARGET... | out OUT FUZZ_DIR TARGET... | self-test]" >&2
    exit 2
    ;;
esac
