#!/usr/bin/env python3
"""Check toxblock.onnx with ONNX Runtime against the original Keras model's outputs.

Environment: .venv-ort (requirements-verify.txt: onnxruntime==1.31.1, numpy). Run:
    .venv-ort/bin/python verify_toxblock_onnx.py [--jsonl reference.jsonl] [--tol 1e-5]

For every row: tokenizes `text` with reimpl_toxblock.py (toxblock_tokenizer.json) and requires
exactly `toxblock_tokens`; runs the ONNX model (once batched, once with batch size 1) and
requires |onnx - toxblock_raw| <= tol and |rescale(onnx) - toxblock| <= tol for all 6 labels.
Also works on ham_scores.jsonl written by ham_stats.py (same field names).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reimpl_toxblock import ToxBlockTokenizer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "toxblock.onnx"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "toxblock_tokenizer.json"))
    ap.add_argument("--jsonl", default=os.path.join(HERE, "reference.jsonl"))
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    assert ort.__version__ == "1.31.1", ort.__version__

    tok = ToxBlockTokenizer(args.tokenizer)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    print(f"input  {inp.name} {inp.type} {inp.shape}")
    print(f"output {out.name} {out.type} {out.shape}")
    assert (inp.name, inp.type, inp.shape[1]) == ("input_ids", "tensor(int32)", 100)
    assert (out.name, out.type, out.shape[1]) == ("probs", "tensor(float)", 6)

    rows = [json.loads(line) for line in open(args.jsonl, encoding="utf-8")]
    labels = tok.labels
    bad = 0
    ids = np.zeros((len(rows), 100), dtype=np.int32)
    for i, r in enumerate(rows):
        enc = tok.encode(r["text"])
        if "toxblock_tokens" in r and enc != r["toxblock_tokens"]:
            print(f"TOKEN MISMATCH {r.get('id', i)}: {r['text'][:60]!r}")
            bad += 1
        ids[i] = r.get("toxblock_tokens", enc)

    batched = np.concatenate([sess.run(None, {"input_ids": ids[s:s + args.batch]})[0]
                              for s in range(0, len(rows), args.batch)])
    single = np.concatenate([sess.run(None, {"input_ids": ids[i:i + 1]})[0] for i in range(len(rows))])
    assert batched.dtype == np.float32 and batched.shape == (len(rows), 6)
    want_raw = np.array([[r["toxblock_raw"][k] for k in labels] for r in rows], dtype=np.float64)
    want_res = np.array([[r["toxblock"][k] for k in labels] for r in rows], dtype=np.float64)
    got_res = np.array([tok.rescale(list(map(float, p))) for p in batched], dtype=np.float64)
    d_raw = np.abs(batched.astype(np.float64) - want_raw)
    d_single = np.abs(single.astype(np.float64) - want_raw)
    d_res = np.abs(got_res - want_res)
    for name, d in (("raw (batched)", d_raw), ("raw (batch=1)", d_single), ("rescaled", d_res)):
        worst = np.unravel_index(np.argmax(d), d.shape)
        print(f"{name:14s} max |onnx - keras| = {d.max():.3e}  (row {rows[worst[0]].get('id', worst[0])}, "
              f"{labels[worst[1]]}); rows over tol: {int((d > args.tol).any(axis=1).sum())}")
        bad += int((d > args.tol).any(axis=1).sum())
    print(f"{len(rows)} rows checked, failures = {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
