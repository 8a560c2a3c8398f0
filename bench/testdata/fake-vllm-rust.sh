#!/usr/bin/env bash
# A stand-in for vLLM's Rust client codec binary, for
# bench/test_msgspec_compare.py: `fake-vllm-rust.sh bench CASE.json...`
# prints `<case id> decode_ns=<n> encode_ns=<n>` per file, as the real one
# does, the id read from the file; plus a banner line the parser must skip.
set -euo pipefail
[ "$1" = bench ] || { echo "usage: $0 bench CASE.json..." >&2; exit 2; }
shift
echo "vllm-rust codec bench (stand-in)"
n=1000
for f in "$@"; do
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["case"])' "$f")
    echo "$id decode_ns=$n encode_ns=$((n / 2))"
    n=$((n + 1000))
done
