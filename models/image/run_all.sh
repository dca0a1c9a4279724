#!/usr/bin/env bash
# Rebuild every artifact in order (about 10 minutes on 2 cores, most of it tfjs CPU inference).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"
./setup.sh
PY=.venv/bin/python
$PY convert_nsfwjs.py                 # -> nsfwjs_mid.onnx (+ .sha256, .json)
./fetch_opennsfw.sh                   # -> build/opennsfw/open-nsfw.onnx (hash-checked)
$PY make_testimages.py                # -> testimages/ (+ LICENSES.md, manifest.json)
$PY make_reference_scores.py          # -> reference_scores*.json, reference_checks.json
./fetch_safe_photos.sh                # -> safe/ (not committed)
$PY score_safe_photos.py              # -> STATS.md, build/safe_scores.json
$PY ../fetch.py                       # -> ../cache/mtcnn_*.onnx (faces_spec.py reads them)
$PY faces_reference.py                # -> faces_reference.json (the package's MTCNN)
$PY faces_spec.py check-resize        # INTER_AREA emulation == cv2.resize
$PY faces_spec.py check               # spec == package on every image
$PY make_large.py                     # -> build/large_12mp.jpg (not committed)
$PY bench_pillow_draft.py build/large_12mp.jpg -n 15
$PY faces_bench.py                    # faces.md "Cost" tables
