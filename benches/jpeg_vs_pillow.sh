#!/usr/bin/env bash
# 12 MP baseline JPEG to the models' input: modgate against libjpeg-turbo's DCT-scaled decode
# (Pillow's draft), interleaved in rounds on the same file, printing the ratio per round.
#
#   benches/jpeg_vs_pillow.sh            (from the repository root)
#
# modgate's side: DCT-scaled decode, both models' resizes and open-NSFW's JPEG round trip.
# Pillow's side: models/image/bench_pillow_draft.py (draft + resize to 224), pinned Pillow in
# a venv under target/. Issue 5's target: at most 1.2 times Pillow's time.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pillow-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet pillow==12.1.1
fi
exec cargo bench --bench jpeg_pipeline
