#!/usr/bin/env python3
"""Measures cost per text (one thread) and whether an int8 dynamic quantization of the encoder
keeps the heads' scores within 0.02.

  python3 quant_check.py --enc ENC_DIR --data DATA --heads heads.json --n 1500 --out quant.json
The int8 model is made with onnxruntime.quantization.quantize_dynamic from the graph that ONNX
Runtime optimizes at load (the 4-bit layer weights folded to fp32); the word table stays 4-bit.
"""
import argparse
import json
import os
import random
import sys
import time

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed import embed_texts, head_probs, load_tokenizer, session  # noqa: E402


def timing(sess, L, B, reps=20):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 200000, (B, L)).astype(np.int64)
    ids[:, 0], ids[:, -1] = 0, 2
    am = np.ones((B, L), np.int64)
    sess.run(["embedding"], {"input_ids": ids, "attention_mask": am})
    t0 = time.perf_counter()
    for _ in range(reps):
        sess.run(["embedding"], {"input_ids": ids, "attention_mask": am})
    return (time.perf_counter() - t0) / reps / B * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--enc", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--heads", required=True)
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    src = os.path.join(a.enc, "e5-small-q4.onnx")
    folded = os.path.join(a.enc, "e5-small-folded.onnx")
    int8 = os.path.join(a.enc, "e5-small-int8.onnx")
    if not os.path.exists(int8):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = folded
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, int8, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                         per_channel=True)
    res = {"bytes_int8": os.path.getsize(int8)}
    s4, s8 = session(src), session(int8)
    for L in (16, 32, 64, 128) if not os.environ.get("SKIP_TIMING") else ():
        for B in (1, 8):
            res[f"ms_per_text_q4_L{L}_B{B}"] = round(timing(s4, L, B, 10 if L > 64 else 20), 2)
            res[f"ms_per_text_int8_L{L}_B{B}"] = round(timing(s8, L, B, 10 if L > 64 else 20), 2)
            print(L, B, res[f"ms_per_text_q4_L{L}_B{B}"], res[f"ms_per_text_int8_L{L}_B{B}"], file=sys.stderr)
    heads = json.load(open(a.heads))
    rows = [json.loads(l) for l in open(os.path.join(a.data, "table.jsonl"))]
    val = [r for r in rows if r["split"] == "val"]
    random.Random(1).shuffle(val)
    val = val[: a.n]
    tok = load_tokenizer(os.path.join(a.enc, "tokenizer.json"))
    texts = [r["text"] for r in val]
    e4 = embed_texts(s4, tok, texts, log=False)
    e8 = embed_texts(s8, tok, texts, log=False)
    p4 = np.stack([head_probs(h, e4) for h in heads["categories"]], 1)
    p8 = np.stack([head_probs(h, e8) for h in heads["categories"]], 1)
    d = np.abs(p4 - p8)
    res["n_texts"] = len(val)
    res["cosine_mean"] = float((e4 * e8).sum(1).mean())
    res["cosine_min"] = float((e4 * e8).sum(1).min())
    res["prob_absdiff_max"] = float(d.max())
    res["prob_absdiff_p99"] = float(np.percentile(d, 99))
    res["share_over_0.02"] = float((d > 0.02).mean())
    res["per_category_max"] = {h["name"]: float(d[:, i].max()) for i, h in enumerate(heads["categories"])}
    flips = {}
    for i, h in enumerate(heads["categories"]):
        for nm in ("review", "reject"):
            flips[f"{h['name']}/{nm}"] = int(((p4[:, i] >= h[nm]) != (p8[:, i] >= h[nm])).sum())
    res["decision_flips"] = flips
    json.dump(res, open(a.out, "w"), indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
