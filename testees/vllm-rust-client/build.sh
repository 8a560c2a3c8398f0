#!/usr/bin/env bash
# Build the vLLM Rust client testee (docs/testee.md §10) and print the path of
# its binary on standard output (everything else goes to standard error).
# `build.sh --test` runs the testee's own tests instead, `--clippy` lints it.
#
# 1. Download vLLM's source distribution into the cache, from the package
#    index pip is configured with (sdist_url.py: PIP_INDEX_URL, pip config's
#    index-url, else pip's default; a mirror or proxy works), and check its
#    sha256 against the pin below (the one PyPI's simple index publishes).
# 2. Extract only what the client crate needs (rust/Cargo.toml, rust/Cargo.lock,
#    rust/src/engine-core-client, rust/src/metrics); nothing of vLLM is changed.
# 3. Write a small Cargo workspace around them: the workspace dependencies
#    of vLLM's rust/Cargo.toml that the two crates use, except `zeromq`,
#    which vLLM takes from a git revision of zmq.rs (package version 0.6.0,
#    with `bind_listener`, which crates.io's 0.6.0 lacks): crates.io's
#    zeromq 0.7.0 is used instead, so github is not needed. The testee uses
#    only the client's codec, never its ZeroMQ transport. vLLM's Cargo.lock
#    seeds the lock file so every other crate is the version vLLM pins. The testee package is our
#    testees/vllm-rust-client/Cargo.toml with its two repository paths made
#    absolute.
# 4. cargo build --release with the target dir in the cache, outside the repo.
#
# Environment: ENGINE_CONFORMANCE_CACHE (default ~/.cache/engine-conformance),
# VLLM_RUST_TOOLCHAIN (default stable; vLLM's crates need edition 2024, Rust
# >= 1.85; vLLM builds with 1.95).
set -euo pipefail

VLLM_VERSION=0.33.0
SDIST_SHA256=f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${ENGINE_CONFORMANCE_CACHE:-$HOME/.cache/engine-conformance}"
sdist="$cache/sdist/vllm-$VLLM_VERSION.tar.gz"
base="$cache/vllm-rust-client"
ws="$base/ws-$VLLM_VERSION"
toolchain="${VLLM_RUST_TOOLCHAIN:-stable}"

log() { echo "build.sh: $*" >&2; }

# 1. The sdist, verified.
mkdir -p "$cache/sdist"
if [[ ! -f "$sdist" ]] || ! echo "$SDIST_SHA256  $sdist" | sha256sum -c --status -; then
    SDIST_URL=$(python3 "$here/sdist_url.py" vllm "$VLLM_VERSION")
    log "downloading $SDIST_URL"
    curl -fsSL --retry 3 -o "$sdist.part" "$SDIST_URL"
    if ! echo "$SDIST_SHA256  $sdist.part" | sha256sum -c --status -; then
        log "sha256 mismatch for $SDIST_URL (expected $SDIST_SHA256); not used"
        rm -f "$sdist.part"
        exit 1
    fi
    mv "$sdist.part" "$sdist"
fi

# 2. Extract what the client crate needs, once (the stamp is written last).
stamp="$ws/.extracted-$SDIST_SHA256"
if [[ ! -f "$stamp" ]]; then
    log "extracting the client crate from $sdist"
    rm -rf "$ws"
    mkdir -p "$ws/vllm"
    top="vllm-$VLLM_VERSION/rust"
    tar -xzf "$sdist" -C "$ws/vllm" --strip-components=2 \
        "$top/Cargo.toml" "$top/Cargo.lock" "$top/src/engine-core-client" "$top/src/metrics"
    touch "$stamp"
fi

# 3. The workspace manifest (regenerated every time: cheap, and it follows
# edits of our testee manifest).
python3 - "$ws" "$repo" <<'PY'
import sys, tomllib, pathlib

ws, repo = map(pathlib.Path, sys.argv[1:])
vllm = tomllib.loads((ws / "vllm/Cargo.toml").read_text())
wsdeps = vllm["workspace"]["dependencies"]
testee = (repo / "testees/vllm-rust-client/Cargo.toml").read_text()

def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)

# Every workspace dependency the members name (dependencies and
# dev-dependencies: cargo resolves both for workspace members).
needed = set()
members = [ws / "vllm/src/engine-core-client", ws / "vllm/src/metrics"]
manifests = [tomllib.loads((m / "Cargo.toml").read_text()) for m in members]
manifests.append(tomllib.loads(testee))
for m in manifests:
    for table in ("dependencies", "dev-dependencies", "build-dependencies"):
        for name, spec in m.get(table, {}).items():
            if isinstance(spec, dict) and spec.get("workspace"):
                needed.add(name)

lines = []
for name in sorted(needed):
    spec = wsdeps[name]
    if name == "zeromq":
        # vLLM pins a git revision of zmq.rs (package version 0.6.0, newer
        # than crates.io's 0.6.0); crates.io's 0.7.0 has its API.
        spec = {k: v for k, v in spec.items() if k not in ("git", "rev", "tag", "branch")}
        spec["version"] = "=0.7.0"
    if isinstance(spec, dict) and "path" in spec:
        spec = dict(spec, path="vllm/" + spec["path"])
    lines.append(f"{name} = {toml_value(spec)}")

pkg = vllm["workspace"]["package"]
out = [
    "# Generated by testees/vllm-rust-client/build.sh; do not edit.",
    "[workspace]",
    'members = ["vllm/src/engine-core-client", "vllm/src/metrics", "testee"]',
    'resolver = "3"',
    "",
    "[workspace.package]",
    *(f"{k} = {toml_value(v)}" for k, v in pkg.items()),
    "",
    "[workspace.dependencies]",
    *lines,
    "",
    "[workspace.lints.clippy]",
    *(f"{k} = {toml_value(v)}" for k, v in vllm["workspace"].get("lints", {}).get("clippy", {}).items()),
    "",
    "[profile.release]",
    'lto = "thin"',
    "debug = 1",
    "",
]
(ws / "Cargo.toml").write_text("\n".join(out))

# The testee package: our manifest, its repository paths made absolute.
(ws / "testee").mkdir(exist_ok=True)
testee = testee.replace('path = "src/main.rs"', f'path = "{repo}/testees/vllm-rust-client/src/main.rs"')
testee = testee.replace('path = "../../protocol"', f'path = "{repo}/protocol"')
(ws / "testee/Cargo.toml").write_text("# Generated from testees/vllm-rust-client/Cargo.toml by build.sh; do not edit.\n" + testee)

# vLLM's lock file seeds ours, on every build (cargo prunes what is unused
# and resolves only what vLLM's lock lacks: zeromq and our package), so the
# versions of every crate vLLM pins stay vLLM's whatever our manifest adds.
(ws / "Cargo.lock").write_text((ws / "vllm/Cargo.lock").read_text())
PY

# 4. Build (or, with --test, run the testee's own tests; with --clippy, lint
# it).
export CARGO_TARGET_DIR="${VLLM_RUST_CLIENT_TARGET:-$base/target}"
case "${1:-}" in
    --test) exec cargo "+$toolchain" test --release --manifest-path "$ws/Cargo.toml" -p vllm-rust-client-testee ;;
    --clippy) exec cargo "+$toolchain" clippy --release --all-targets --no-deps --manifest-path "$ws/Cargo.toml" \
        -p vllm-rust-client-testee -- -D warnings ;;
    "") ;;
    *) log "unknown argument $1 (usage: build.sh [--test|--clippy])"; exit 2 ;;
esac
log "cargo +$toolchain build --release (target dir $CARGO_TARGET_DIR)"
cargo "+$toolchain" build --release --quiet --manifest-path "$ws/Cargo.toml" -p vllm-rust-client-testee >&2
echo "$CARGO_TARGET_DIR/release/vllm-rust-client-testee"
