#!/usr/bin/env python3
"""Trains one head per category (default: a one-hidden-layer MLP, 384 -> 128 ReLU -> 1; --head linear:
logistic regression) on the encoder's embeddings (train split only),
chooses review/reject thresholds on the validation split, checks the held-out half of the
SpamAssassin ham, and writes heads.json and QUALITY.md figures (quality.json).

  python3 train.py --data DATA --emb DATA/emb_q4 --out models/text/classifier

Thresholds (per category, on the validation rows where the category is known):
  reject = the lowest score at which precision >= 0.90 (with at least 5 true positives above it)
  review = the lowest score at which precision >= 0.70
  and both never below the 99.7th (review) / 99.9th (reject) percentile of the scores of the benign
  validation rows that are labelled 0 for the category (SpamAssassin ham e-mails of the validation
  split, 415, and SMS ham of the validation split, 600, for spam/hate/threat/self_harm), so that
  normal text stays quiet; the held-out half of the ham e-mails is only measured.
  If a precision target is never reached the threshold is 1.0 (the action never fires) and the
  category is marked so in QUALITY.md.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.metrics import average_precision_score

CATS = ["hate", "harassment", "threat", "self_harm", "sexual", "toxic", "spam"]
P_REJECT, P_REVIEW = 0.90, 0.70
REVIEW_FLOOR_PCT, REJECT_FLOOR_PCT = 99.7, 99.9
HIDDEN = 128
INPUT_SCALE = 10.0  # the MLP sees 10 * embedding (unit-norm inputs are small); folded into its weights
C_GRID = [0.25, 1.0, 4.0, 16.0]
SEED = 20261207


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def threshold_at_precision(y, s, target, min_tp=5):
    o = np.argsort(-s, kind="stable")
    ys, ss = y[o], s[o]
    tp = np.cumsum(ys)
    k = np.arange(1, len(ys) + 1)
    prec = tp / k
    best = None
    for i in range(len(ss)):
        # a cut can only be placed where the score changes
        if i + 1 < len(ss) and ss[i + 1] == ss[i]:
            continue
        if prec[i] >= target and tp[i] >= min_tp:
            best = ss[i]
    return None if best is None else float(best)


def pr_at(y, s, t):
    if t is None:
        return None, 0.0, 0
    pred = s >= t
    tp = int((pred & (y == 1)).sum())
    npred = int(pred.sum())
    return (tp / npred if npred else None), (tp / max(1, int(y.sum()))), npred


def dump_compact(obj):
    """JSON with floats as shortest round-trip float32-exact decimals (%.9g), one category per block."""
    def conv(o):
        if isinstance(o, float):
            return float(f"{o:.9g}")
        if isinstance(o, list):
            return [conv(x) for x in o]
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        return o
    return json.dumps(conv(obj), separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--emb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--encoder", required=True, help="encoder.json describing the ONNX file")
    ap.add_argument("--exclude-sources", default="")
    ap.add_argument("--head", choices=["mlp", "linear"], default="mlp")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(os.path.join(a.data, "table.jsonl"))]
    ids = json.load(open(a.emb + ".ids.json"))
    E = np.load(a.emb + ".npy")
    pos = {i: k for k, i in enumerate(ids)}
    excl = set(x for x in a.exclude_sources.split(",") if x)
    rows = [r for r in rows if r["id"] in pos and r["source"] not in excl]
    X = E[[pos[r["id"]] for r in rows]]
    split = np.array([r["split"] for r in rows])
    lang = np.array([r["lang"] for r in rows])
    src = np.array([r["source"] for r in rows])
    ham_val = np.array([r["source"] in ("spamassassin", "smsspam") and r["tag"] == "ham" and r["split"] == "val"
                        for r in rows])
    hold = split == "ham_holdout"
    heads, quality = [], {"categories": {}, "ham_holdout": {}}
    hold_scores = {}
    for c in CATS:
        y = np.array([r["labels"].get(c, -1) for r in rows])
        tr = (split == "train") & (y >= 0)
        va = (split == "val") & (y >= 0)
        npos_tr, npos_va = int(y[tr].sum()), int(y[va].sum())
        print(f"{c}: train {tr.sum()} ({npos_tr} pos), val {va.sum()} ({npos_va} pos)", file=sys.stderr)
        if npos_tr < 20 or npos_va < 5:
            quality["categories"][c] = {"unchecked": True, "train_pos": npos_tr, "val_pos": npos_va}
            continue
        if a.head == "linear":
            # choose C on a 15 % slice of train (never on val)
            rng = np.random.default_rng(SEED)
            idx = np.where(tr)[0]
            rng.shuffle(idx)
            cut = int(len(idx) * 0.15)
            inner_va, inner_tr = idx[:cut], idx[cut:]
            best = None
            for C in C_GRID:
                m = LogisticRegression(C=C, class_weight="balanced", max_iter=3000)
                m.fit(X[inner_tr], y[inner_tr])
                ap_ = average_precision_score(y[inner_va], m.decision_function(X[inner_va]))
                if best is None or ap_ > best[1] + 1e-4:
                    best = (C, ap_)
            C = best[0]
            m = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
            m.fit(X[tr], y[tr])
            w, b = m.coef_[0].astype(np.float64), float(m.intercept_[0])
            head = {"weights": [float(x) for x in w], "bias": b}
            s_all = sigmoid(X.astype(np.float64) @ w + b)
            hp = {"C": C, "inner_auprc": best[1]}
        else:
            # early stopping on a 10 % slice of train (never on val)
            m = MLPClassifier(hidden_layer_sizes=(HIDDEN,), alpha=1e-3, early_stopping=True,
                              validation_fraction=0.1, max_iter=200, random_state=SEED % (2 ** 31))
            m.fit(X[tr] * INPUT_SCALE, y[tr])
            W1 = m.coefs_[0].T.astype(np.float64) * INPUT_SCALE   # [HIDDEN, dim], scale folded in
            b1 = m.intercepts_[0].astype(np.float64)
            w2 = m.coefs_[1][:, 0].astype(np.float64)
            b2 = float(m.intercepts_[1][0])
            head = {"hidden": {"activation": "relu", "weights": [[float(v) for v in row] for row in W1],
                               "bias": [float(v) for v in b1]},
                    "weights": [float(v) for v in w2], "bias": b2}
            s_all = sigmoid(np.maximum(X.astype(np.float64) @ W1.T + b1, 0) @ w2 + b2)
            hp = {"hidden": HIDDEN, "alpha": 1e-3, "epochs": int(m.n_iter_),
                  "best_inner_accuracy": float(m.best_validation_score_)}
        sv, yv = s_all[va], y[va]
        t_rej = threshold_at_precision(yv, sv, P_REJECT)
        t_rev = threshold_at_precision(yv, sv, P_REVIEW)
        benign = ham_val & (y == 0)
        ham_floor = float(np.percentile(s_all[benign], REVIEW_FLOOR_PCT))
        rej_floor = float(np.percentile(s_all[benign], REJECT_FLOOR_PCT))
        notes = []
        if t_rev is None:
            notes.append(f"precision {P_REVIEW} never reached on validation: review never fires")
            t_rev_final = 1.0
        else:
            t_rev_final = max(t_rev, ham_floor)
            if ham_floor > t_rev:
                notes.append(f"review raised from {t_rev:.3f} (P 0.70) to the benign floor {ham_floor:.3f}")
        if t_rej is None:
            notes.append(f"precision {P_REJECT} never reached on validation: reject never fires")
            t_rej_final = 1.0
        else:
            t_rej_final = max(t_rej, t_rev_final, rej_floor)
            if t_rej_final > t_rej:
                notes.append(f"reject raised from {t_rej:.3f} (P 0.90) to {t_rej_final:.3f} (benign floor / review)")
        cq = {"head": a.head, **hp, "train_n": int(tr.sum()), "train_pos": npos_tr,
              "val_n": int(va.sum()), "val_pos": npos_va, "review": t_rev_final, "reject": t_rej_final,
              "review_at_p70": t_rev, "reject_at_p90": t_rej, "ham_floor": ham_floor, "notes": notes,
              "by_lang": {}, "by_source": {}}

        def block(mask):
            yy, ss = y[mask], s_all[mask]
            d = {"n": int(mask.sum()), "pos": int(yy.sum())}
            if 0 < yy.sum() < len(yy):
                d["auprc"] = float(average_precision_score(yy, ss))
                d["base_rate"] = float(yy.mean())
            for nm, t in (("review", t_rev_final), ("reject", t_rej_final)):
                p, r_, npred = pr_at(yy, ss, t)
                d[nm] = {"precision": p, "recall": r_ if yy.sum() else None, "flagged": npred}
            return d

        cq["all"] = block(va)
        for lg in sorted(set(lang[va])):
            cq["by_lang"][lg] = block(va & (lang == lg))
        for sc in sorted(set(src[va])):
            cq["by_source"][sc] = block(va & (src == sc))
        quality["categories"][c] = cq
        hold_scores[c] = s_all[hold]
        heads.append({"name": c, **head, "review": round(t_rev_final, 6), "reject": round(t_rej_final, 6)})
        print(f"  {hp} val AUPRC {cq['all'].get('auprc'):.3f} review {t_rev_final:.3f} reject {t_rej_final:.3f} {notes}",
              file=sys.stderr)
    # held-out ham: false positives
    nh = int(hold.sum())
    any_rev = np.zeros(nh, bool)
    any_rej = np.zeros(nh, bool)
    per = {}
    for h in heads:
        s = hold_scores[h["name"]]
        per[h["name"]] = {"review": int((s >= h["review"]).sum()), "reject": int((s >= h["reject"]).sum()),
                          "p99": float(np.percentile(s, 99)), "max": float(s.max())}
        any_rev |= s >= h["review"]
        any_rej |= s >= h["reject"]
    quality["ham_holdout"] = {"n": nh, "any_review": int(any_rev.sum()), "any_reject": int(any_rej.sum()),
                              "per_category": per}
    print(f"ham holdout: {nh} texts, flagged at review {any_rev.sum()} ({100 * any_rev.mean():.2f} %), "
          f"at reject {any_rej.sum()}", file=sys.stderr)
    enc = json.load(open(a.encoder))
    score = ("sigmoid(dot(weights, embedding) + bias)" if a.head == "linear" else
             "h = max(0, hidden.weights @ embedding + hidden.bias) (hidden.weights: [128][dim] rows); "
             "p = sigmoid(dot(weights, h) + bias)")
    out = {"encoder": enc, "dim": int(X.shape[1]), "head": a.head, "score": score, "categories": heads}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "heads.json"), "w") as f:
        f.write(dump_compact(out))
    with open(os.path.join(a.out, "quality.json"), "w") as f:
        json.dump(quality, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
