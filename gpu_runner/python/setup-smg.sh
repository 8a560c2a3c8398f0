#!/usr/bin/env bash
# Creates (or reuses) the venv holding SMG (Shepherd Model Gateway) 1.13.0
# from PyPI, the first gateway `gpu-runner gateway` scores. Pinned: smg and
# its whole dependency closure. Reused when `.complete` exists.
#   $VENV_ROOT/smg-1.13.0   (default ~/.cache/engine-conformance/venvs)
# Usage: gpu_runner/python/setup-smg.sh
set -euo pipefail
VENV_ROOT=${VENV_ROOT:-$HOME/.cache/engine-conformance/venvs}
PY=${PYTHON:-python3}
v=$VENV_ROOT/smg-1.13.0
if [ -f "$v/.complete" ]; then echo "reusing $v"; exit 0; fi
mkdir -p "$VENV_ROOT"
rm -rf "$v"
"$PY" -m venv "$v"
"$v/bin/pip" install -q --no-deps \
  smg==1.13.0 \
  setproctitle==1.3.8 \
  grpcio==1.85.3 \
  grpcio-health-checking==1.85.1 \
  protobuf==7.36.2 \
  PyYAML==6.0.4 \
  typing_extensions==4.16.0
"$v/bin/pip" check
"$v/bin/smg" --version
"$v/bin/python" -c 'from smg.serve import _zmq_handshake_port as p; assert p("ipc:///tmp/smg-zmq/ts0.ipc") == 25152'
touch "$v/.complete"
echo "ready: $v"
