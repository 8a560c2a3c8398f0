#!/usr/bin/env bash
# Regenerates docs/reports/scoreboard.md from the committed reports
# (golden/gateway/reports/: every gateway, differential, release-sweep and
# fault report there; `gpu-runner scoreboard --reports-dir`). A test
# (gpu_runner/tests/cli_mock.rs) fails when the file is stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build -q -p gpu-runner
"${CARGO_TARGET_DIR:-$root/target}/debug/gpu-runner" scoreboard --reports-dir golden/gateway/reports > docs/reports/scoreboard.md
echo "docs/reports/scoreboard.md from $(ls golden/gateway/reports/*.json | wc -l) reports"
