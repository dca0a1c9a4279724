#!/usr/bin/env python3
"""Time JPEG decoding with Pillow (pinned: pillow==12.1.1, libjpeg-turbo 3.1.3).

Usage: bench_pillow_draft.py FILE.jpg [-n RUNS]      (e.g. on build/large_12mp.jpg)

  (a) full decode:            Image.open(bytes); im.load()
  (b) draft + resize:         Image.open(bytes); im.draft("RGB", (224, 224)); im.load();
                              im.resize((224, 224), BILINEAR)
      draft() makes libjpeg-turbo decode at a DCT scale of 1/2, 1/4 or 1/8 (largest reduction
      that keeps both sides >= 224), so far fewer pixels are decoded (IDCT at reduced size).
  (c) full decode + resize:   (a) followed by im.resize((224, 224), BILINEAR), for comparison.
The file is read into memory once; prints the median (and min) wall time in ms over RUNS
(after 1 warm-up run). Single-threaded (Pillow decodes JPEG on one thread).
NB: draft changes the pixels (it is not the reference preprocessing of either model).
"""
import argparse
import io
import statistics
import time

import PIL
import PIL.features
from PIL import Image

PINNED = "12.1.1"


def timeit(fn, n):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("-n", type=int, default=20)
    a = ap.parse_args()
    if PIL.__version__ != PINNED:
        raise SystemExit(f"Pillow {PIL.__version__} != pinned {PINNED}")
    data = open(a.file, "rb").read()
    im0 = Image.open(io.BytesIO(data))
    print(f"{a.file}: {im0.format} {im0.mode} {im0.size[0]}x{im0.size[1]}, {len(data)} bytes; "
          f"Pillow {PIL.__version__}, libjpeg-turbo {PIL.features.version('libjpeg_turbo')}")

    def full():
        im = Image.open(io.BytesIO(data))
        im.load()
        return im

    def draft():
        im = Image.open(io.BytesIO(data))
        im.draft("RGB", (224, 224))
        im.load()
        return im.resize((224, 224), Image.Resampling.BILINEAR)

    def full_resize():
        return full().resize((224, 224), Image.Resampling.BILINEAR)

    im = Image.open(io.BytesIO(data))
    im.draft("RGB", (224, 224))
    print(f"draft decodes at {im.size[0]}x{im.size[1]} (scale 1/{im0.size[0] // im.size[0]})")
    for name, fn in [("(a) full decode", full), ("(b) draft(RGB,224x224)+resize 224", draft),
                     ("(c) full decode+resize 224", full_resize)]:
        med, mn = timeit(fn, a.n)
        print(f"{name:36s} median {med:8.2f} ms   min {mn:8.2f} ms   (n={a.n})")


if __name__ == "__main__":
    main()
