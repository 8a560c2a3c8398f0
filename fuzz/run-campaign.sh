#!/usr/bin/env bash
# Runs the fuzz targets of every cargo-fuzz crate (fuzz/crates.sh) one
# after another, each for a fixed time, and prints a table of their final
# libFuzzer statistics.
#
#   fuzz/run-campaign.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 600 (a scheduled campaign); with no TARGET
# every target of every crate's `cargo fuzz list` runs, and only the crates
# holding a named TARGET are built. Each target reads the committed seeds
# (<crate>/corpus/<target>/, never written) and grows its own corpus in
# <crate>/campaign-corpus/<target>/ (git-ignored, kept between runs). Logs
# go to <crate>/campaign-logs/<target>.log, crashes to
# <crate>/artifacts/<target>/. Exits non-zero when any target finds a crash,
# a leak, a timeout or an out-of-memory input.
#
# Environment: ENGINE_FUZZ_ALLOC=strict|known|off selects the allocation
# bound of fuzz/'s targets (fuzz/src/alloc.rs; default strict).
# FUZZ_RSS_LIMIT_MB (2048), FUZZ_TIMEOUT_S (10) and FUZZ_MAX_LEN (the
# crate's, fuzz/crates.sh: 8192 for fuzz/, 16384 for gpu_runner/fuzz/) are
# passed to libFuzzer as -rss_limit_mb, -timeout and -max_len, with the
# crate's dictionary as -dict. FUZZ_SANITIZER (address, the default, with
# leak detection; or none, about 3.5 times the executions per second) is
# passed to cargo fuzz as --sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
. fuzz/crates.sh

secs="${1:-600}"
shift || true

if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# Every (crate, target), in crate order; a target name in two crates is an error.
mapfile -t crates < <(fuzz_crates)
run_crate=()
run_target=()
declare -A crate_of=()
for c in "${crates[@]}"; do
  mapfile -t listed < <(cd "$c" && cargo fuzz list)
  for t in "${listed[@]}"; do
    if [ -n "${crate_of[$t]:-}" ]; then
      echo "fuzz target $t is in both ${crate_of[$t]} and $c" >&2
      exit 1
    fi
    crate_of[$t]=$c
    if [ "$#" -eq 0 ] || printf '%s\n' "$@" | grep -qx -- "$t"; then
      run_crate+=("$c")
      run_target+=("$t")
    fi
  done
done
for t in "$@"; do
  if [ -z "${crate_of[$t]:-}" ]; then
    echo "no fuzz crate has a target $t (crates: ${crates[*]})" >&2
    exit 1
  fi
done

san="${FUZZ_SANITIZER:-address}"
built=()
for c in "${run_crate[@]}"; do
  if ! printf '%s\n' "${built[@]}" | grep -qx -- "$c"; then
    (cd "$c" && cargo +nightly fuzz build -O --sanitizer "$san")
    built+=("$c")
  fi
done

failed=()
rows=()
for i in "${!run_target[@]}"; do
  c=${run_crate[$i]}
  t=${run_target[$i]}
  dict=$(fuzz_dict "$c")
  max_len=$(fuzz_max_len "$c")
  mkdir -p "$c/campaign-logs" "$c/campaign-corpus/$t" "$c/corpus/$t"
  log="$c/campaign-logs/$t.log"
  echo "== $t ($c): ${secs}s"
  if (cd "$c" && cargo +nightly fuzz run -O --sanitizer "$san" "$t" "campaign-corpus/$t" "corpus/$t" -- \
      -dict="$dict" \
      -max_len="$max_len" \
      -max_total_time="$secs" \
      -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" \
      -timeout="${FUZZ_TIMEOUT_S:-10}" \
      -print_final_stats=1) >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$c:$t")
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
  echo "failed: ${failed[*]} (logs in <crate>/campaign-logs/, inputs in <crate>/artifacts/)" >&2
  exit 1
fi
