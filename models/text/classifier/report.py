#!/usr/bin/env python3
"""Writes the figures of QUALITY.md (from quality.json) and the counts table of SOURCES.md (from
DATA/counts.json) between the <!-- figures --> / <!-- counts --> markers.

  python3 report.py --data DATA --dir models/text/classifier
"""
import argparse
import json
import os
import re

CATS = ["hate", "harassment", "threat", "self_harm", "sexual", "toxic", "spam"]


def f(x, d=3):
    return "–" if x is None else f"{x:.{d}f}"


def figures(q, qi8=None):
    L = []
    L.append("| category | val rows (pos) | AUPRC | base rate | review | P / R at review | reject | P / R at reject |")
    L.append("|---|---|---|---|---|---|---|---|")
    for c in CATS:
        d = q["categories"].get(c)
        if d is None or d.get("unchecked"):
            L.append(f"| {c} | unchecked (train pos {d and d.get('train_pos')}, val pos {d and d.get('val_pos')}) | | | | | | |")
            continue
        a = d["all"]
        L.append(f"| {c} | {a['n']} ({a['pos']}) | {f(a.get('auprc'))} | {f(a.get('base_rate'))} | {f(d['review'])} | "
                 f"{f(a['review']['precision'])} / {f(a['review']['recall'])} | {f(d['reject'])} | "
                 f"{f(a['reject']['precision'])} / {f(a['reject']['recall'])} |")
    L.append("")
    notes = [(c, n) for c in CATS for n in q["categories"].get(c, {}).get("notes", [])]
    if notes:
        L.append("Threshold notes: " + "; ".join(f"`{c}`: {n}" for c, n in notes) + ".")
        L.append("")
    for key, title in (("by_lang", "language"), ("by_source", "source")):
        L.append(f"### Per {title} (validation split)")
        L.append("")
        L.append(f"| category | {title} | rows (pos) | AUPRC | P / R at review | flagged at review | P / R at reject |")
        L.append("|---|---|---|---|---|---|---|")
        for c in CATS:
            d = q["categories"].get(c)
            if d is None or d.get("unchecked"):
                continue
            for k, b in sorted(d[key].items()):
                L.append(f"| {c} | {k} | {b['n']} ({b['pos']}) | {f(b.get('auprc'))} | "
                         f"{f(b['review']['precision'])} / {f(b['review']['recall'])} | {b['review']['flagged']} | "
                         f"{f(b['reject']['precision'])} / {f(b['reject']['recall'])} |")
        L.append("")
    h = q["ham_holdout"]
    L.append("### Held-out SpamAssassin ham (never trained on, never used for a threshold)")
    L.append("")
    L.append(f"{h['n']} e-mails (subject + first text part, first 128 tokens). Flagged at review by any category: "
             f"**{h['any_review']} ({100 * h['any_review'] / h['n']:.2f} %)**; at reject: {h['any_reject']} "
             f"({100 * h['any_reject'] / h['n']:.2f} %).")
    L.append("")
    L.append("| category | flagged at review | flagged at reject | p99 score | max score |")
    L.append("|---|---|---|---|---|")
    for c, d in h["per_category"].items():
        L.append(f"| {c} | {d['review']} | {d['reject']} | {f(d['p99'])} | {f(d['max'])} |")
    L.append("")
    return "\n".join(L)


def counts_table(cj):
    L = ["| source/lang | split | rows | labels |", "|---|---|---|---|"]
    for k in sorted(cj["kept"]):
        for sp in ("train", "val", "ham_holdout"):
            d = cj["kept"][k].get(sp)
            if not d:
                continue
            labs = ", ".join(f"{x} {d[x]}" for x in sorted(d) if x != "rows")
            L.append(f"| {k} | {sp} | {d['rows']} | {labs} |")
    L.append("")
    L.append("Rows read before caps and deduplication (by the source's own label): " + "; ".join(
        f"{k}: " + ", ".join(f"{t} {n}" for t, n in sorted(v.items())) for k, v in sorted(cj["raw"].items())) + ".")
    return "\n".join(L)


def splice(path, marker, text):
    s = open(path).read()
    s = re.sub(rf"<!-- {marker} -->.*<!-- /{marker} -->", lambda m: f"<!-- {marker} -->\n{text}\n<!-- /{marker} -->",
               s, flags=re.S)
    open(path, "w").write(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    q = json.load(open(os.path.join(a.dir, "quality.json")))
    splice(os.path.join(a.dir, "QUALITY.md"), "figures", figures(q))
    cj = json.load(open(os.path.join(a.data, "counts.json")))
    splice(os.path.join(a.dir, "SOURCES.md"), "counts", counts_table(cj))


if __name__ == "__main__":
    main()
