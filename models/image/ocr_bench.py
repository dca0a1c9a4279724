#!/usr/bin/env python3
"""CPU cost of rapidocr 3.10.0 (default models, one intra-op thread) and what a size bound costs
in accuracy (ocr.md, section "Cost and bounds").

Images (made here, seeded, from make_ocr_set.py's fonts and safe/ photos; written to build/):
  ocr_bench_1mp.png      1152x864 photo, 8 lines of text (20-48 px)
  ocr_bench_12mp.png     4000x3000 photo, the same layout 3.47x larger (70-167 px)
  ocr_bench_dense.png    1152x864 plain page, 48 short lines (18 px): many boxes
  ocr_bench_ladder_K.png (K = 0, 1, 2) 4000x3000 photos with text in 12 font sizes, 14 to 160 px
                         (0.5 % to 5 % of the 3000 px side), 2 lines each, one line a row

Cost: process CPU time (median of 3 runs after a warm-up) for the whole call and the package's
per-stage times (det, cls, rec; wall, single-threaded). Bounds: Global.max_side_len (the package
shrinks the image so that its larger side is at most this, then rounds both sides to multiples
of 32; default 2000) and the detector's limit_side_len (default 736, "min": the smaller side is
brought UP to 736). For each bound: cost, and on the ladders which text heights are still read
exactly.

    .venv/bin/python ocr_bench.py            # prints the tables (about 3 minutes)
"""
import os
import statistics
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_ocr_set  # noqa: E402
import ocr_reference  # noqa: E402

BUILD = os.path.join(HERE, "build")
LINES = ["Call 555-867-5309 today", "john.smith@example.com", "www.freeprizes.win/claim",
         "What the fuck is this", "Fresh bread every morning", "+44 20 7946 0958",
         "Visit bit.ly/3xYz9Qa", "Keep calm and carry on"]


def photo(path, w, h):
    with Image.open(path) as im:
        im = im.convert("RGB")
    f = max(w / im.width, h / im.height)
    im = im.resize((max(w, round(im.width * f)), max(h, round(im.height * f))), Image.BICUBIC)
    return im.crop((0, 0, w, h))


def draw_lines(img, lines, font_paths, rng, scale=1.0, size_range=(20, 48)):
    d = ImageDraw.Draw(img)
    y = int(30 * scale)
    out = []
    for text in lines:
        size = int(rng.integers(*size_range) * scale)
        font = ImageFont.truetype(font_paths[int(rng.integers(len(font_paths)))], size)
        x = int(rng.integers(10, 200) * scale)
        d.text((x, y), text, font=font, fill=(255, 255, 255), stroke_width=max(1, int(2 * scale)), stroke_fill=(0, 0, 0))
        out.append(text)
        y += int(size * 1.9)
    return out


def make_images():
    fonts = make_ocr_set.fetch_fonts()
    bg = os.path.join(HERE, "safe", "mate-backgrounds", "mate_abstract_Elephants_5640x3172.jpg")
    bgs = [bg, os.path.join(HERE, "safe", "gnome-backgrounds", "wood-d.webp"),
           os.path.join(HERE, "safe", "mate-backgrounds", "mate_nature_GreenMeadow.jpg")]
    images = {}
    rng = np.random.default_rng(7)
    im = photo(bg, 1152, 864)
    images["1mp"] = (im, draw_lines(im, LINES, fonts, rng))
    rng = np.random.default_rng(7)
    im = photo(bg, 4000, 3000)
    images["12mp"] = (im, draw_lines(im, LINES, fonts, rng, scale=4000 / 1152))
    page = Image.new("RGB", (1152, 864), (250, 250, 245))
    d = ImageDraw.Draw(page)
    font = ImageFont.truetype(fonts[0], 18)
    dense = []
    for i in range(48):
        text = f"{LINES[i % len(LINES)].split()[0]} {i:02d}"
        x, y = 40 + (i % 3) * 370, 30 + (i // 3) * 50
        d.text((x, y), text, font=font, fill=(20, 20, 20))
        dense.append(text)
    images["dense"] = (page, dense)
    sizes = [14, 18, 22, 27, 33, 40, 50, 62, 78, 98, 125, 160]
    for k, path in enumerate(bgs):
        rng = np.random.default_rng(100 + k)
        im = photo(path, 4000, 3000)
        d = ImageDraw.Draw(im)
        ladder = []
        y = 40
        for size in sizes:
            for j in range(2):
                text = LINES[int(rng.integers(len(LINES)))]
                font = ImageFont.truetype(fonts[int(rng.integers(len(fonts)))], size)
                l, t, r, b = font.getbbox(text)
                x = 60 + int(rng.integers(0, 400))
                d.text((x - l, y - t), text, font=font, fill=(255, 255, 255), stroke_width=max(1, size // 14), stroke_fill=(0, 0, 0))
                ladder.append((size, text, (x, y, x + r - l, y + b - t)))
                y += int((b - t) * 1.5) + 16
        images[f"ladder_{k}"] = (im, ladder)
    for name, (im, _) in images.items():
        im.save(os.path.join(BUILD, f"ocr_bench_{name}.png"))
    return images


def cpu_of(ocr, bgr, runs=3):
    ocr(bgr)  # warm-up (first call loads nothing more: sessions exist, but allocations settle)
    times, stages = [], []
    out = None
    for _ in range(runs):
        t0 = time.process_time()
        out = ocr(bgr)
        times.append(time.process_time() - t0)
        stages.append(getattr(out, "elapse_list", [0, 0, 0]))
    med = statistics.median(times)
    st = [statistics.median([s[i] or 0 for s in stages]) for i in range(3)]
    return med, st, out


def det_size(w, h, max_side, limit=736):
    """The detector's input size for an image of w x h under the package's rules."""
    r32 = lambda v: int(round(v / 32) * 32)  # noqa: E731
    if max(w, h) > max_side:
        ratio = max_side / h if h > w else max_side / w
        w, h = r32(int(w * ratio)), r32(int(h * ratio))
    if min(w, h) < limit:
        ratio = limit / h if h < w else limit / w
    else:
        ratio = 1.0
    return r32(int(w * ratio)), r32(int(h * ratio))


def main():
    ocr_reference.check_versions()
    images = make_images()
    bounds = [2000, 1600, 1280, 1024, 960]
    engines = {b: ocr_reference.engine(**{"Global.max_side_len": b}) for b in bounds}
    print("image          bound  det input    CPU s   det    cls    rec   lines  read exactly")
    for name in ["1mp", "12mp", "dense"]:
        im, truth = images[name]
        bgr = np.ascontiguousarray(np.asarray(im)[:, :, ::-1])
        for b in bounds:
            if name != "12mp" and b < 2000:
                continue
            cpu, st, out = cpu_of(engines[b], bgr)
            txts = list(out.txts or [])
            exact = sum(1 for t in truth if t in txts)
            dw, dh = det_size(im.width, im.height, b)
            print(f"{name:14s} {b:5d}  {dw:4d}x{dh:<5d} {cpu:6.2f}  {st[0]:5.2f}  {st[1]:5.2f}  {st[2]:5.2f}  {len(txts):5d}  {exact}/{len(truth)}")
    print()
    print("ladders (3 x 4000x3000, 2 lines per font size): lines read exactly per bound")
    heights = sorted({h for k in range(3) for h, _, _ in images[f"ladder_{k}"][1]})
    header = "bound  CPU s(median)  " + " ".join(f"{h:>4d}" for h in heights) + "   all"
    print(header)
    for b in bounds:
        per_h = {h: 0 for h in heights}
        cpus = []
        for k in range(3):
            im, ladder = images[f"ladder_{k}"]
            bgr = np.ascontiguousarray(np.asarray(im)[:, :, ::-1])
            t0 = time.process_time()
            out = engines[b](bgr)
            cpus.append(time.process_time() - t0)
            res = {"boxes": [] if out.boxes is None else out.boxes.tolist(), "txts": list(out.txts or [])}
            for h, text, (x0, y0, x1, y1) in ladder:
                line = {"quad": [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]}
                got, _ = ocr_reference.matched_text(line, res) if res["txts"] else ("", [])
                if got == text:
                    per_h[h] += 1
        print(f"{b:5d}  {statistics.median(cpus):12.2f}  " + " ".join(f"{per_h[h]:>4d}" for h in heights)
              + f"  {sum(per_h.values()):4d}")
    print("(font sizes in px of the 4000x3000 image, 6 lines per size)")


if __name__ == "__main__":
    main()
