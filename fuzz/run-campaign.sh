#!/usr/bin/env bash
# Runs the fuzz targets one after another, each for a fixed time, and
# prints a table of their final libFuzzer statistics.
#
#   fuzz/run-campaign.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 600 (a scheduled campaign); with no TARGET
# every target of `cargo fuzz list` runs. Each target reads the committed
# seeds (fuzz/corpus/<target>/, never written) and grows its own corpus in
# fuzz/campaign-corpus/<target>/ (git-ignored, kept between runs). Logs go
# to fuzz/campaign-logs/<target>.log, crashes to fuzz/artifacts/<target>/.
# Exits non-zero when any target finds a crash, a leak, a timeout or an
# out-of-memory input.
#
# Environment: ENGINE_FUZZ_ALLOC=strict|known|off selects the allocation
# bound (fuzz/src/alloc.rs; default strict). FUZZ_RSS_LIMIT_MB (2048),
# FUZZ_TIMEOUT_S (10) and FUZZ_MAX_LEN (8192) are passed to libFuzzer as
# -rss_limit_mb, -timeout and -max_len. FUZZ_SANITIZER (address, the
# default, with leak detection; or none, about 3.5 times the executions per
# second) is passed to cargo fuzz as --sanitizer.
set -euo pipefail
cd "$(dirname "$0")"

secs="${1:-600}"
shift || true

if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

san="${FUZZ_SANITIZER:-address}"
cargo +nightly fuzz build -O --sanitizer "$san"

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

mkdir -p campaign-logs
failed=()
rows=()
for t in "${targets[@]}"; do
  mkdir -p "campaign-corpus/$t" "corpus/$t"
  log="campaign-logs/$t.log"
  echo "== $t: ${secs}s"
  if cargo +nightly fuzz run -O --sanitizer "$san" "$t" "campaign-corpus/$t" "corpus/$t" -- \
      -dict=engine.dict \
      -max_len="${FUZZ_MAX_LEN:-8192}" \
      -max_total_time="$secs" \
      -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" \
      -timeout="${FUZZ_TIMEOUT_S:-10}" \
      -print_final_stats=1 >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
    grep -E "panicked|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" | head -20 || true
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  rows+=("| $t | ${secs} s | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${rss:-?} MB | $status |")
done

echo
echo "| target | time | executions | exec/s | cov | ft | corpus | peak RSS | result |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed: ${failed[*]} (logs in fuzz/campaign-logs/, inputs in fuzz/artifacts/)" >&2
  exit 1
fi
