#!/usr/bin/env bash
# Create the Python venv (.venv) and the node modules (js/node_modules) with pinned versions.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip>=24"
# tf2onnx 1.16.1 declares protobuf~=3.20 but onnxruntime 1.31.1 needs protobuf>=4.25.8;
# tf2onnx works with 4.25.8, so it goes in with --no-deps (its deps are in the file).
.venv/bin/pip install -q -r requirements-convert.txt
.venv/bin/pip install -q --no-deps tf2onnx==1.16.1
.venv/bin/pip install -q -r requirements.txt
# MTCNN reference (faces_*.py): --no-deps, see requirements-faces.txt.
.venv/bin/pip install -q --no-deps -r requirements-faces.txt
# OCR reference (ocr_*.py): --no-deps, see requirements-ocr.txt.
.venv/bin/pip install -q --no-deps -r requirements-ocr.txt
(cd js && npm ci --ignore-scripts --no-audit --no-fund)
.venv/bin/python -c "import PIL, onnxruntime, numpy, skimage, tf2onnx, tensorflow as tf; print('python ok', PIL.__version__, onnxruntime.__version__, numpy.__version__, skimage.__version__, tf2onnx.__version__, tf.__version__)"
