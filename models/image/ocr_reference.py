#!/usr/bin/env python3
"""Reference OCR results: the PyPI package rapidocr 3.10.0 with its default models and settings.

Runs `rapidocr.RapidOCR()` (default config.yaml: PP-OCRv6 small det + rec, ch_ppocr_mobile_v2.0
cls, use_det/use_cls/use_rec on, text_score 0.5; ONNX Runtime with one intra-op and one
inter-op thread) on every image of build/ocr_set/ (make_ocr_set.py) and writes
ocr_reference.json:

    {"000.png": {"boxes": [[[x, y] x 4], ...], "txts": ["...", ...], "scores": [s, ...]}, ...}

Boxes are the package's float32 quads in the original image (top-left, top-right, bottom-right,
bottom-left), in its output order (top-to-bottom, then left-to-right), as floats. Scores are the
recognition scores (mean of the per-character max probabilities, rounded to 5 decimals by the
package). Then prints character accuracy and word recall against build/ocr_set/truth.json.

Pixels: Pillow 12.1.1 decodes the PNG, `convert("RGB")`, and the package gets the HxWx3 uint8
array in **BGR** order (an ndarray is taken as BGR, unconverted; a file path would be read by
Pillow with EXIF rotation and converted RGB -> BGR, the same pixels for these PNGs).

Environment (same venv as requirements.txt, see requirements-ocr.txt):
    .venv/bin/pip install --no-deps -r requirements-ocr.txt

    .venv/bin/python ocr_reference.py            # writes ocr_reference.json, prints accuracy
    .venv/bin/python ocr_reference.py --score    # accuracy of ocr_reference.json only
"""
import argparse
import hashlib
import json
import os
import sys
import time

import cv2
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SET = os.path.join(HERE, "build", "ocr_set")
OUT = os.path.join(HERE, "ocr_reference.json")
MODELS_SHA256 = {  # as models/fetch.py pins them (ocr_det, ocr_rec, ocr_cls)
    "PP-OCRv6_det_small.onnx": "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
    "PP-OCRv6_rec_small.onnx": "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
    "ch_ppocr_mobile_v2.0_cls_mobile.onnx": "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
}
ONE_THREAD = {
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    "Global.log_level": "warning",
}


def check_versions():
    import onnxruntime as ort
    import PIL
    import pyclipper  # noqa: F401
    import rapidocr

    folder = os.path.join(os.path.dirname(rapidocr.__file__), "models")
    for name, sha in MODELS_SHA256.items():
        got = hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
        assert got == sha, (name, got)
    from importlib.metadata import version

    assert version("rapidocr") == "3.10.0", version("rapidocr")
    assert version("pyclipper") == "1.4.0", version("pyclipper")
    assert version("shapely") == "2.2.0", version("shapely")
    assert cv2.__version__ == "4.11.0", cv2.__version__
    assert np.__version__ == "1.26.4", np.__version__
    assert ort.__version__ == "1.31.1", ort.__version__
    assert PIL.__version__ == "12.1.1", PIL.__version__


def engine(**params):
    from rapidocr import RapidOCR

    return RapidOCR(params={**ONE_THREAD, **params})


def load_bgr(path):
    with Image.open(path) as image:
        image.seek(0)
        return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


def result_of(out):
    """RapidOCROutput (or an empty output) as the JSON row."""
    if getattr(out, "txts", None) is None or out.boxes is None or len(out.txts) == 0:
        return {"boxes": [], "txts": [], "scores": []}
    return {
        "boxes": [[[float(x), float(y)] for x, y in box] for box in out.boxes],
        "txts": list(out.txts),
        "scores": [float(s) for s in out.scores],
    }


# ---------------------------------------------------------------------------------------------
# accuracy against truth.json
# ---------------------------------------------------------------------------------------------

def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def matched_text(line, result):
    """The predicted lines whose box centre lies in the truth line's box (its quad's bounding
    box grown by 4 px), left to right, joined by a space."""
    q = np.array(line["quad"])
    x0, y0 = q.min(axis=0) - 4
    x1, y1 = q.max(axis=0) + 4
    hits = []
    used = []
    for k, (box, txt) in enumerate(zip(result["boxes"], result["txts"])):
        c = np.mean(np.array(box), axis=0)
        if x0 <= c[0] <= x1 and y0 <= c[1] <= y1:
            hits.append((c[0], txt))
            used.append(k)
    hits.sort()
    return " ".join(t for _, t in hits), used


def score(reference, truth, label="rapidocr"):
    """Prints and returns character accuracy (1 - sum edit distance / sum truth length; exact, and
    case- and space-insensitive), word recall (truth words, split on spaces, found among the
    predicted words of the matched lines; exact and case-insensitive), per category."""
    agg = {}
    lines_missed = 0
    lines_exact = 0
    extra = 0
    n_lines = 0
    for name, info in truth.items():
        result = reference.get(name, {"boxes": [], "txts": [], "scores": []})
        used_all = set()
        for line in info["lines"]:
            n_lines += 1
            pred, used = matched_text(line, result)
            used_all.update(used)
            t = line["text"]
            if not pred:
                lines_missed += 1
            if pred == t:
                lines_exact += 1
            rows = [("all", t, pred), (line["category"], t, pred)]
            for cat, tt, pp in rows:
                a = agg.setdefault(cat, {"ed": 0, "len": 0, "ed_n": 0, "len_n": 0, "w": 0, "w_hit": 0, "w_hit_i": 0, "lines": 0})
                a["lines"] += 1
                a["ed"] += edit_distance(tt, pp)
                a["len"] += len(tt)
                tn, pn = tt.lower().replace(" ", ""), pp.lower().replace(" ", "")
                a["ed_n"] += edit_distance(tn, pn)
                a["len_n"] += len(tn)
                pw = pp.split()
                pwi = [w.lower() for w in pw]
                for w in tt.split():
                    a["w"] += 1
                    if w in pw:
                        a["w_hit"] += 1
                        pw.remove(w)
                    if w.lower() in pwi:
                        a["w_hit_i"] += 1
                        pwi.remove(w.lower())
        extra += len(result["txts"]) - len(used_all)
    print(f"{label}: {len(truth)} images, {n_lines} truth lines: {lines_exact} read exactly, "
          f"{lines_missed} with no text found; {extra} predicted lines outside every truth line")
    print(f"{'category':10s} {'lines':>5s} {'char acc':>8s} {'char acc (case/space-insens.)':>29s} {'word recall':>11s} {'(case-insens.)':>14s}")
    summary = {}
    for cat in ["all", "sentence", "profanity", "email", "phone", "url"]:
        a = agg.get(cat)
        if not a:
            continue
        ca = 1 - a["ed"] / a["len"]
        can = 1 - a["ed_n"] / a["len_n"]
        wr = a["w_hit"] / a["w"]
        wri = a["w_hit_i"] / a["w"]
        summary[cat] = {"lines": a["lines"], "char_acc": ca, "char_acc_norm": can, "word_recall": wr, "word_recall_ci": wri}
        print(f"{cat:10s} {a['lines']:5d} {ca:8.4f} {can:29.4f} {wr:11.4f} {wri:14.4f}")
    summary["lines_exact"] = lines_exact
    summary["lines_missed"] = lines_missed
    summary["extra"] = extra
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--score", action="store_true", help="only score the existing ocr_reference.json")
    args = parser.parse_args()
    with open(os.path.join(SET, "truth.json")) as f:
        truth = json.load(f)
    if not args.score:
        check_versions()
        ocr = engine()
        out = {}
        total = 0.0
        for name in sorted(truth):
            bgr = load_bgr(os.path.join(SET, name))
            t0 = time.process_time()
            out[name] = result_of(ocr(bgr))
            cpu = time.process_time() - t0
            total += cpu
            print(f"{name}\t{bgr.shape[1]}x{bgr.shape[0]}\tlines {len(out[name]['txts'])}\tcpu {cpu:.2f}s\t"
                  + " | ".join(out[name]["txts"]), flush=True)
        with open(OUT, "w") as f:
            json.dump(out, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{len(out)} images, cpu {total:.1f}s ({total / len(out):.2f}s an image)", file=sys.stderr)
    with open(OUT) as f:
        reference = json.load(f)
    score(reference, truth)


if __name__ == "__main__":
    main()
