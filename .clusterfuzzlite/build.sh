#!/bin/bash -eu
# ClusterFuzzLite (OSS-Fuzz) build script: every target of every cargo-fuzz
# crate (fuzz/crates.sh: fuzz/, the codec's decoders; gpu_runner/fuzz/, the
# testee protocol and the scenario and expectations files) into $OUT, with
# its seed corpus, dictionary and libFuzzer options.
#
# Runs inside .clusterfuzzlite/Dockerfile's image (OSS-Fuzz base-builder-rust),
# whose `compile` sets $SRC, $OUT, $WORK, $SANITIZER and RUSTFLAGS and wraps
# `cargo` (for SANITIZER=coverage, `cargo fuzz build` becomes an
# instrumented `cargo build --bins`, in the crate's folder). CI runs it
# outside docker through fuzz/check-cflite-build.sh, on the build
# fuzz/run-ci.sh made.
#
# The crates are those of fuzz/crates.sh (the root Cargo.toml's `exclude`
# entries with `cargo-fuzz = true`), the targets those of `cargo fuzz list`
# in each (their [[bin]]s): a new target or crate is built, seeded and
# fuzzed with no edit here, and the build fails when a target has no seeds
# in <crate>/corpus/ or two crates name the same target. For each target
# T of crate C, $OUT gets:
#   T                  the libFuzzer binary (`cargo fuzz build -O`, ASan)
#   T_seed_corpus.zip  C/corpus/T/ and C/regressions/T/ (the latter named
#                      regression-*), flat, with fixed timestamps
#   T.dict             C's dictionary (the one C/*.dict)
#   T.options          the limits fuzz/run-campaign.sh runs with (max_len:
#                      the crate's, fuzz/crates.sh)
cd "$SRC/engine-conformance"
. fuzz/crates.sh

case "${SANITIZER:-address}" in
  address | coverage) ;;
  *)
    echo "build.sh: sanitizer '$SANITIZER' is not built for Rust here (address or coverage)" >&2
    exit 1
    ;;
esac

mapfile -t crates < <(fuzz_crates)
if [ "${#crates[@]}" -eq 0 ]; then
  echo "build.sh: fuzz/crates.sh names no cargo-fuzz crate" >&2
  exit 1
fi

shipped=()
for c in "${crates[@]}"; do
  mapfile -t targets < <(cd "$c" && cargo fuzz list)
  if [ "${#targets[@]}" -eq 0 ]; then
    echo "build.sh: \`cargo fuzz list\` names no target in $c" >&2
    exit 1
  fi
  for t in "${targets[@]}"; do
    if printf '%s\n' "${shipped[@]}" | grep -qx -- "$t"; then
      echo "build.sh: two crates have a fuzz target $t (\$OUT is flat)" >&2
      exit 1
    fi
    shipped+=("$t")
  done
  fuzz/check-cflite-build.sh seeds "$c" "${targets[@]}"
  dict=$c/$(fuzz_dict "$c")
  max_len=$(fuzz_max_len "$c")

  # -O: release, as fuzz/run-ci.sh and fuzz/run-campaign.sh build (the same
  # flags, so CI's run of this script reuses their build in <crate>/target).
  (cd "$c" && cargo fuzz build -O)

  bin_dir=$c/target/x86_64-unknown-linux-gnu/release
  for t in "${targets[@]}"; do
    cp "$bin_dir/$t" "$OUT/$t"
    python3 - "$OUT/${t}_seed_corpus.zip" "$c/corpus/$t" "$c/regressions/$t" <<'PY'
import os, sys, zipfile
out, seeds, regressions = sys.argv[1:]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for folder, prefix in ((seeds, ""), (regressions, "regression-")):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                info = zipfile.ZipInfo(prefix + name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as f:
                    z.writestr(info, f.read())
PY
    cp "$dict" "$OUT/$t.dict"
    cat >"$OUT/$t.options" <<EOF_OPTIONS
[libfuzzer]
max_len = $max_len
rss_limit_mb = 2048
timeout = 10
EOF_OPTIONS
  done

  fuzz/check-cflite-build.sh out "$OUT" "$c" "${targets[@]}"
done
