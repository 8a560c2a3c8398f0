#!/bin/bash -eu
# ClusterFuzzLite (OSS-Fuzz) build script: every cargo-fuzz target of fuzz/
# into $OUT, with its seed corpus, dictionary and libFuzzer options.
#
# Runs inside .clusterfuzzlite/Dockerfile's image (OSS-Fuzz base-builder-rust),
# whose `compile` sets $SRC, $OUT, $WORK, $SANITIZER and RUSTFLAGS and wraps
# `cargo` (for SANITIZER=coverage, `cargo fuzz build` becomes an
# instrumented `cargo build --bins`). CI runs it outside docker through
# fuzz/check-cflite-build.sh, on the build fuzz/run-ci.sh made.
#
# The targets are those of `cargo fuzz list` (the [[bin]]s of
# fuzz/Cargo.toml): a new target is built, seeded and fuzzed with no edit
# here, and the build fails when a target has no seeds in fuzz/corpus/.
# For each target T, $OUT gets:
#   T                  the libFuzzer binary (`cargo fuzz build -O`, ASan)
#   T_seed_corpus.zip  fuzz/corpus/T/ and fuzz/regressions/T/ (the latter
#                      named regression-*), flat, with fixed timestamps
#   T.dict             fuzz/engine.dict
#   T.options          the limits fuzz/run-campaign.sh runs with
cd "$SRC/engine-conformance"

case "${SANITIZER:-address}" in
  address | coverage) ;;
  *)
    echo "build.sh: sanitizer '$SANITIZER' is not built for Rust here (address or coverage)" >&2
    exit 1
    ;;
esac

mapfile -t targets < <(cargo fuzz list)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "build.sh: \`cargo fuzz list\` names no target" >&2
  exit 1
fi
fuzz/check-cflite-build.sh seeds fuzz "${targets[@]}"

# -O: release, as fuzz/run-ci.sh and fuzz/run-campaign.sh build (the same
# flags, so CI's run of this script reuses their build in fuzz/target).
cargo fuzz build -O

bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
for t in "${targets[@]}"; do
  cp "$bin_dir/$t" "$OUT/$t"
  python3 - "$OUT/${t}_seed_corpus.zip" "fuzz/corpus/$t" "fuzz/regressions/$t" <<'PY'
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
  cp fuzz/engine.dict "$OUT/$t.dict"
  cat >"$OUT/$t.options" <<'EOF'
[libfuzzer]
max_len = 8192
rss_limit_mb = 2048
timeout = 10
EOF
done

fuzz/check-cflite-build.sh out "$OUT" fuzz "${targets[@]}"
