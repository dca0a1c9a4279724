#!/usr/bin/env python3
"""numpy-only reimplementation of alt-profanity-check 1.9.1 predict_prob from profanity_svm.json.

Proves that profanity_svm.json is complete, and is the executable spec for the Rust port
(PIPELINE.md, section 2). No scikit-learn, no `re`: tokenization is written out explicitly.

    python reimpl_profanity.py                 # check against reference.jsonl (|diff| <= 1e-6)
    python reimpl_profanity.py --jsonl FILE --field profanity_prob
    python reimpl_profanity.py --text "some text"
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import unicodedata
from typing import Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def is_word_char(c: str) -> bool:
    """Python `re` str-pattern \\w: c.isalnum() or c == '_'.
    For Python 3.11 (Unicode 14.0) this is exactly: general category L* or N*, or '_'."""
    return c == "_" or unicodedata.category(c)[0] in "LN"


def tokenize(text: str) -> List[str]:
    """sklearn word analyzer with lowercase=True, token_pattern=r"(?u)\\b\\w\\w+\\b":
    str.lower(), then every maximal run of word chars that is >= 2 code points long."""
    text = text.lower()
    out: List[str] = []
    start = None
    for i, c in enumerate(text):
        if is_word_char(c):
            if start is None:
                start = i
        else:
            if start is not None and i - start >= 2:
                out.append(text[start:i])
            start = None
    if start is not None and len(text) - start >= 2:
        out.append(text[start:])
    return out


class ProfanityModel:
    def __init__(self, path: str = os.path.join(HERE, "profanity_svm.json")):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        v, c = d["vectorizer"], d["classifier"]
        p = v["params"]
        assert p["lowercase"] and p["analyzer"] == "word" and p["ngram_range"] == [1, 1]
        assert p["norm"] == "l2" and p["use_idf"] and not p["sublinear_tf"] and not p["binary"]
        assert c["method"] == "sigmoid" and c["classes"] == [0, 1]
        self.vocab: Dict[str, int] = v["vocabulary"]
        self.stop = set(v["stop_words"])
        self.idf = np.asarray(v["idf"], dtype=np.float64)
        self.coef = np.asarray([f["svm_coef"] for f in c["folds"]], dtype=np.float64)  # [folds, n]
        self.intercept = np.asarray([f["svm_intercept"] for f in c["folds"]], dtype=np.float64)
        self.a = np.asarray([f["sigmoid_a"] for f in c["folds"]], dtype=np.float64)
        self.b = np.asarray([f["sigmoid_b"] for f in c["folds"]], dtype=np.float64)

    def features(self, text: str) -> Dict[int, float]:
        """column -> l2-normalised tf-idf weight (sparse row)."""
        counts: Dict[int, int] = {}
        for tok in tokenize(text):
            if tok in self.stop:  # never in the vocabulary anyway
                continue
            j = self.vocab.get(tok)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        cols = sorted(counts)
        w = [counts[j] * self.idf[j] for j in cols]
        norm = math.sqrt(sum(x * x for x in w))
        if norm == 0.0:
            return {}
        return {j: x / norm for j, x in zip(cols, w)}

    def predict_prob(self, text: str) -> float:
        x = self.features(text)
        if x:
            cols = np.fromiter(x.keys(), dtype=np.int64)
            vals = np.fromiter(x.values(), dtype=np.float64)
            d = self.coef[:, cols] @ vals + self.intercept  # decision_function per fold
        else:
            d = self.intercept.copy()
        p = 1.0 / (1.0 + np.exp(self.a * d + self.b))  # _SigmoidCalibration: expit(-(a*d + b))
        p = np.where((p > 1.0) & (p <= 1.0 + 1e-5), 1.0, p)  # sklearn's clip (no-op for a sigmoid)
        return float(p.sum() / len(p))  # CalibratedClassifierCV: mean over folds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "profanity_svm.json"))
    ap.add_argument("--jsonl", default=os.path.join(HERE, "reference.jsonl"))
    ap.add_argument("--field", default="profanity_prob")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--text", action="append")
    args = ap.parse_args()
    m = ProfanityModel(args.model)
    if args.text:
        for t in args.text:
            print(json.dumps({"text": t, "tokens": tokenize(t), "profanity_prob": m.predict_prob(t)},
                             ensure_ascii=False))
        return
    n = 0
    worst = 0.0
    bad = 0
    with open(args.jsonl, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            want = row[args.field]
            got = m.predict_prob(row["text"])
            diff = abs(got - want)
            worst = max(worst, diff)
            n += 1
            if "profanity_tokens" in row and row["profanity_tokens"] != tokenize(row["text"]):
                print(f"TOKEN MISMATCH row {n}: {row['profanity_tokens']} vs {tokenize(row['text'])}")
                bad += 1
            if diff > args.tol:
                print(f"MISMATCH row {n}: got {got!r} want {want!r} text={row['text'][:80]!r}")
                bad += 1
    print(f"{n} rows, max |diff| = {worst:.3e}, failures = {bad}")
    sys.exit(1 if bad or n == 0 else 0)


if __name__ == "__main__":
    main()
