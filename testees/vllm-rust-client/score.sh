#!/usr/bin/env bash
# Score vLLM's Rust client (docs/testee.md §10) against the committed corpus:
# build it (build.sh), then `conformance verify --testee` with a JSON report.
# Not part of the default CI (.ci/run): it downloads vLLM's sdist.
# Usage: testees/vllm-rust-client/score.sh [REPORT.json]
#   (default: testees/reports/vllm-rust-client-0.33.0.json, the report the
#   scoreboard reads). Exit status: verify's (1 when a case fails, as the
#   client fails many).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
report="${1:-$root/testees/reports/vllm-rust-client-0.33.0.json}"
bin="$(testees/vllm-rust-client/build.sh)"
mkdir -p "$(dirname "$report")"
cargo run --quiet --release -p conformance -- verify --corpus golden/ --testee "$bin" \
    --format json --output "$report"
