#!/usr/bin/env bash
# Create the two pinned virtual environments used by the scripts in this directory.
#   .venv      TensorFlow 2.15.1 (CPU) + tf2onnx + original tox-block + original alt-profanity-check
#   .venv-ort  onnxruntime 1.31.1 + numpy (ONNX verification, numpy-only reimplementations)
# Two venvs because tf2onnx 1.16.1 needs protobuf~=3.20 and onnxruntime 1.31.1 needs protobuf>=4.25.8.
# Needs: python3.11 with venv, network access to PyPI. Re-runnable (existing venvs are reused).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
cd "$HERE"
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 required (wheels pinned for cp311)"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
[ -x .venv-ort/bin/python ] || "$PY" -m venv .venv-ort
.venv/bin/python -m pip install -q --no-deps -r requirements-convert.txt -r requirements-profanity.txt
.venv-ort/bin/python -m pip install -q --no-deps -r requirements-verify.txt
echo "venvs ready: $HERE/.venv $HERE/.venv-ort"
