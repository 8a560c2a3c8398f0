# Sourced by the fuzzing scripts (run-ci.sh, run-campaign.sh,
# check-cflite-build.sh, .clusterfuzzlite/build.sh): the cargo-fuzz crates
# of this repository and their settings, so that no script lists crates
# or targets by hand.
#
#   fuzz_crates          the crate folders, relative to the repository
#                        root, one a line: the entries of the root
#                        Cargo.toml's workspace `exclude` whose Cargo.toml
#                        has `cargo-fuzz = true` (fuzz first, as listed)
#   fuzz_dict DIR        the crate's libFuzzer dictionary, relative to DIR:
#                        the one *.dict at its root
#   fuzz_max_len DIR     $FUZZ_MAX_LEN, else the crate's
#                        [package.metadata.fuzz-settings] max_len, else 8192
#
# The targets of a crate are `cargo fuzz list` run in its folder; a target
# name must be unique across crates ($OUT of ClusterFuzzLite is flat).

fuzz_repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

fuzz_crates() {
  local entry
  sed -n 's/^exclude *= *\[\(.*\)\].*/\1/p' "$fuzz_repo_root/Cargo.toml" | tr ',' '\n' | tr -d '" ' |
    while read -r entry; do
      if [ -n "$entry" ] && grep -qx 'cargo-fuzz = true' "$fuzz_repo_root/$entry/Cargo.toml" 2>/dev/null; then
        echo "$entry"
      fi
    done
}

fuzz_dict() {
  local dicts=() f
  for f in "$1"/*.dict; do
    if [ -f "$f" ]; then
      dicts+=("$f")
    fi
  done
  if [ "${#dicts[@]}" -ne 1 ]; then
    echo "$1: expected exactly one *.dict (the crate's dictionary), found ${#dicts[@]}" >&2
    return 1
  fi
  basename "${dicts[0]}"
}

# fuzz_setting DIR KEY: KEY's value in the crate's
# [package.metadata.fuzz-settings] (one word: quotes and a trailing
# comment dropped), empty when unset.
fuzz_setting() {
  sed -n "/^\[package\.metadata\.fuzz-settings\]/,/^\[/s/^$2 *= *\"\{0,1\}\([^\" #]*\).*/\1/p" "$1/Cargo.toml"
}

fuzz_max_len() {
  local n
  if [ -n "${FUZZ_MAX_LEN:-}" ]; then
    echo "$FUZZ_MAX_LEN"
    return
  fi
  n=$(fuzz_setting "$1" max_len)
  echo "${n:-8192}"
}

# fuzz_stable_cargo DIR: the cargo options of the crate's stable checks
# (run-ci.sh: `write-seeds --check` and `cargo test`). By default a release
# build in the crate's own target/ (fuzz/: its corpus tests recurse deeper
# than a debug build's stack allows). `stable-build = "workspace"` in the
# crate's [package.metadata.fuzz-settings]: a debug build in the root
# workspace's target/ (CARGO_TARGET_DIR), reusing what the workspace's
# `cargo test` built (gpu_runner/fuzz/, whose dependencies are the
# workspace's crates: about 1.5 minutes where its own release build took 6).
fuzz_stable_cargo() {
  local mode
  mode=$(fuzz_setting "$1" stable-build)
  case "${mode:-release}" in
    release) echo "--release" ;;
    workspace) echo "--target-dir $fuzz_repo_root/target" ;;
    *)
      echo "$1/Cargo.toml: stable-build = \"$mode\": expected \"release\" or \"workspace\"" >&2
      return 1
      ;;
  esac
}
