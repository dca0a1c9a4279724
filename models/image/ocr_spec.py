#!/usr/bin/env python3
"""Executable spec of OCR as rapidocr 3.10.0 runs its default models (ocr.md).

numpy + ONNX Runtime (the three nets from models/cache/: ocr_det.onnx, ocr_cls.onnx,
ocr_rec.onnx) + exactly two OpenCV calls, kept because they are the contour code a port takes
from a library and checks by its output:

    cv2.findContours(mask_u8, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)    (contours, in order)
    cv2.minAreaRect(points) + cv2.boxPoints(rect)                        (rotated rectangle)

Everything else (INTER_LINEAR resize, 2x2 dilation, fillPoly mask + mean, Clipper's round
offset, GEOS area/length, getPerspectiveTransform, warpPerspective INTER_CUBIC + replicate
border, CTC decoding) is written out here in the order and precision the package (numpy,
OpenCV 4.11, pyclipper 1.4.0 = Clipper 6.4.2, shapely 2.2.0 = GEOS) does it. No package code.

    .venv/bin/python ocr_spec.py check-parts   # each emulated OpenCV/Clipper piece vs the library
    .venv/bin/python ocr_spec.py check         # spec vs ocr_reference.json (all images)
    .venv/bin/python ocr_spec.py check-contours  # numpy rectangle vs cv2.minAreaRect; hole contours
    .venv/bin/python ocr_spec.py FILE...       # read files, print lines
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "..", "cache")
F32 = np.float32

# Defaults (rapidocr/config.yaml 3.10.0)
MIN_SIDE_LEN, MAX_SIDE_LEN = 30, 2000          # Global: whole-image bounds
MIN_HEIGHT, WIDTH_HEIGHT_RATIO = 30, 8         # Global: vertical padding of flat images
LIMIT_SIDE_LEN = 736                           # Det: limit_type "min"
THRESH, BOX_THRESH, MAX_CANDIDATES, UNCLIP_RATIO, MIN_SIZE = 0.3, 0.5, 1000, 1.6, 3
CLS_SHAPE, CLS_BATCH, CLS_THRESH = (3, 48, 192), 6, 0.9
REC_SHAPE, REC_BATCH = (3, 48, 320), 6
TEXT_SCORE = 0.5
# OCR_SPEC_RECT=numpy: the pipeline takes min_area_rect_np instead of cv2.minAreaRect (to see
# what a port without OpenCV's rotating calipers gets; `check` then reports the differences)
RECT = os.environ.get("OCR_SPEC_RECT", "cv2")
BOX_SORT_Y_THRESHOLD = 10


# ------------------------------------------------------------------------------------------
# cv2.resize(src, (dw, dh)) with the default INTER_LINEAR, uint8 HxWx3 (OpenCV 4.11):
# 11-bit fixed-point weights, horizontal pass in int, vertical pass ((b*(S>>4))>>16 ... +2)>>2.
# ------------------------------------------------------------------------------------------

def _linear_tab(ssize, dsize):
    """Per output index: source index s0, s1 (clamped) and the two weights (int, sum 2048)."""
    inv_scale = dsize / ssize            # double
    scale = 1.0 / inv_scale              # double
    d = np.arange(dsize, dtype=np.float64)
    f = ((d + 0.5) * scale - 0.5).astype(F32)      # (float)((d + 0.5) * scale - 0.5)
    s = np.floor(f).astype(np.int64)
    f = (f - s.astype(F32)).astype(F32)
    return s, f


def resize_linear(src, dw, dh):
    sh, sw = src.shape[:2]
    if (sw, sh) == (dw, dh):
        return src.copy()
    sx, fx = _linear_tab(sw, dw)
    low = sx < 0
    fx[low], sx[low] = 0, 0                            # left edge: weight on column 0
    high = sx >= sw - 1
    fx[high], sx[high] = 0, sw - 1                     # right edge: weight on the last column
    ax0 = np.rint((F32(1) - fx) * F32(2048)).astype(np.int64)   # saturate_cast<short>: nearest, ties even
    ax1 = np.rint(fx * F32(2048)).astype(np.int64)
    sx1 = np.minimum(sx + 1, sw - 1)
    s = src.astype(np.int64)
    h = s[:, sx, :] * ax0[None, :, None] + s[:, sx1, :] * ax1[None, :, None]   # int, per source row
    sy, fy = _linear_tab(sh, dh)                       # rows: no edge rule, clamped indices
    by0 = np.rint((F32(1) - fy) * F32(2048)).astype(np.int64)
    by1 = np.rint(fy * F32(2048)).astype(np.int64)
    r0 = np.clip(sy, 0, sh - 1)
    r1 = np.clip(sy + 1, 0, sh - 1)
    out = (((by0[:, None, None] * (h[r0] >> 4)) >> 16) + ((by1[:, None, None] * (h[r1] >> 4)) >> 16) + 2) >> 2
    return np.clip(out, 0, 255).astype(np.uint8)


def round32(v):
    """int(round(v / 32) * 32) with Python's round: halves to even (62.5 -> 62)."""
    return int(round(v / 32) * 32)


# ------------------------------------------------------------------------------------------
# 1. Whole-image bounds and vertical padding (rapidocr/utils/process_img.py)
# ------------------------------------------------------------------------------------------

def bound_image(img):
    """resize_image_within_bounds(img, 30, 2000): (image, ratio_h, ratio_w)."""
    h, w = img.shape[:2]
    ratio_h = ratio_w = 1.0
    if max(h, w) > MAX_SIDE_LEN:
        ratio = MAX_SIDE_LEN / h if h > w else MAX_SIDE_LEN / w
        rh, rw = round32(int(h * ratio)), round32(int(w * ratio))
        img = resize_linear(img, rw, rh)
        ratio_h, ratio_w = h / rh, w / rw
    h, w = img.shape[:2]
    if min(h, w) < MIN_SIDE_LEN:
        ratio = MIN_SIDE_LEN / h if h < w else MIN_SIDE_LEN / w
        rh, rw = round32(int(h * ratio)), round32(int(w * ratio))
        img = resize_linear(img, rw, rh)
        ratio_h, ratio_w = h / rh, w / rw   # (replaces, not composes, an earlier ratio)
    return img, ratio_h, ratio_w


def vertical_padding(img):
    """apply_vertical_padding: flat or low images get black rows above and below: (img, top)."""
    h, w = img.shape[:2]
    if h <= MIN_HEIGHT or w / h > WIDTH_HEIGHT_RATIO:
        new_h = max(int(w / WIDTH_HEIGHT_RATIO), MIN_HEIGHT) * 2
        pad = int(abs(new_h - h) / 2)
        out = np.zeros((h + 2 * pad, w, 3), np.uint8)
        out[pad:pad + h] = img
        return out, pad
    return img, 0


# ------------------------------------------------------------------------------------------
# 2. Detection: preprocessing and the DB net
# ------------------------------------------------------------------------------------------

def det_input(img):
    """DetPreProcess (limit_type "min", 736): NCHW float32, BGR planes, (v/255 - 0.5)/0.5."""
    h, w = img.shape[:2]
    ratio = 1.0
    if min(h, w) < LIMIT_SIDE_LEN:
        ratio = LIMIT_SIDE_LEN / h if h < w else LIMIT_SIDE_LEN / w
    rh, rw = round32(int(h * ratio)), round32(int(w * ratio))
    if rh <= 0 or rw <= 0:
        return None
    resized = resize_linear(img, rw, rh)
    x = resized.astype(F32) * F32(1 / 255.0)                       # float32 product
    x = (x.astype(np.float64) - 0.5) / 0.5                         # float64 (mean, std arrays)
    return x.transpose(2, 0, 1)[None].astype(F32)


# ------------------------------------------------------------------------------------------
# 3. DB post-processing (DBPostProcess, score_mode "fast", use_dilation true)
# ------------------------------------------------------------------------------------------

def dilate2x2(m):
    """cv2.dilate(m, ones((2, 2))): anchor (1, 1), so out[y, x] = max of m[y-1..y, x-1..x];
    outside pixels do not count."""
    out = m.copy()
    out[1:, :] = np.maximum(out[1:, :], m[:-1, :])
    out[:, 1:] = np.maximum(out[:, 1:], m[:, :-1])
    out[1:, 1:] = np.maximum(out[1:, 1:], m[:-1, :-1])
    return out


def min_area_rect(points):
    """cv2.minAreaRect + cv2.boxPoints (kept from OpenCV; see ocr.md): (float32 4x2 corners,
    short side)."""
    import cv2

    rect = cv2.minAreaRect(points)
    return cv2.boxPoints(rect), min(rect[1])


def min_area_rect_np(points):
    """A numpy minimum-area rectangle (what a port writes instead of cv2.minAreaRect): convex
    hull (monotone chain, collinear points dropped), then for each hull edge the bounding box in
    that edge's frame; the first smallest area wins. Returns (float32 4x2 corners, short side).
    Same rectangle as OpenCV's up to float rounding (~1e-4 px)."""
    pts = np.unique(np.asarray(points, np.float64).reshape(-1, 2), axis=0)   # sorted by x, y
    if len(pts) == 1:
        return np.repeat(pts, 4, axis=0).astype(F32), 0.0

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for q in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], q) <= 0:
            lower.pop()
        lower.append(q)
    for q in pts[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], q) <= 0:
            upper.pop()
        upper.append(q)
    hull = np.array(lower[:-1] + upper[:-1])
    if len(hull) == 2:
        a, b = hull
        return np.array([a, b, b, a], F32), 0.0
    best = None
    for i in range(len(hull)):
        e = hull[(i + 1) % len(hull)] - hull[i]
        u = e / math.hypot(e[0], e[1])
        v = np.array([-u[1], u[0]])
        pu, pv = hull @ u, hull @ v
        area = (pu.max() - pu.min()) * (pv.max() - pv.min())
        if best is None or area < best[0]:
            best = (area, u, v, pu.min(), pu.max(), pv.min(), pv.max())
    _, u, v, u0, u1, v0, v1 = best
    corners = np.array([u0 * u + v0 * v, u1 * u + v0 * v, u1 * u + v1 * v, u0 * u + v1 * v])
    return corners.astype(F32), float(min(u1 - u0, v1 - v0))


def mini_box(points, rect=None):
    """get_mini_boxes: the rectangle's corners as [left-top, right-top, right-bottom,
    left-bottom] by the package's rule (sort by x, stable; each pair split by y)."""
    corners, sside = (rect or (min_area_rect_np if RECT == "numpy" else min_area_rect))(points)
    p = sorted(list(corners), key=lambda q: q[0])
    i1, i4 = (0, 1) if p[1][1] > p[0][1] else (1, 0)
    i2, i3 = (2, 3) if p[3][1] > p[2][1] else (3, 2)
    return np.array([p[i1], p[i2], p[i3], p[i4]]), sside


def _clip_line(w, h, p1, p2):
    """OpenCV 4.11 clipLine(Size, Point&, Point&): Cohen-Sutherland against [0, w-1] x [0, h-1],
    new coordinates by (int64)((double)(a - y1) * (x2 - x1) / (y2 - y1)) (truncation). Returns
    (inside, p1, p2); the points are changed even when the line is found outside."""
    x1, y1 = p1
    x2, y2 = p2
    right, bottom = w - 1, h - 1

    def code(x, y):
        return (x < 0) + (x > right) * 2 + (y < 0) * 4 + (y > bottom) * 8

    c1, c2 = code(x1, y1), code(x2, y2)
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += int(float(a - y1) * (x2 - x1) / (y2 - y1))
            y1 = a
            c1 = (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += int(float(a - y2) * (x2 - x1) / (y2 - y1))
            y2 = a
            c2 = (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += int(float(a - x1) * (y2 - y1) / (x2 - x1))
                x1 = a
                c1 = 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += int(float(a - x2) * (y2 - y1) / (x2 - x1))
                x2 = a
                c2 = 0
    return (c1 | c2) == 0, (x1, y1), (x2, y2)


def _line8(mask, p1, p2):
    """OpenCV Line(img, p1, p2, color, 8): LineIterator(connectivity 8, left_to_right) pixels,
    the line first clipped to the image by _clip_line when an end lies outside."""
    h, w = mask.shape
    if not (0 <= p1[0] < w and 0 <= p2[0] < w and 0 <= p1[1] < h and 0 <= p2[1] < h):
        inside, p1, p2 = _clip_line(w, h, p1, p2)
        if not inside:
            return
    (x1, y1), (x2, y2) = p1, p2
    if x2 < x1:                                    # left to right
        x1, y1, x2, y2 = x2, y2, x1, y1
    dx, dy = x2 - x1, y2 - y1
    sy = -1 if dy < 0 else 1
    dy = abs(dy)
    steep = dy > dx
    major, minor = (dy, dx) if steep else (dx, dy)
    err = major - 2 * minor
    x, y = x1, y1
    for _ in range(major + 1):
        mask[y, x] = 1
        step_minor = err < 0
        err += -2 * minor + (2 * major if step_minor else 0)
        if steep:
            y += sy
            x += 1 if step_minor else 0
        else:
            x += 1
            y += sy if step_minor else 0


def _cdiv(a, b):
    """C integer division (truncation toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def fill_poly(mask, pts):
    """cv2.fillPoly(mask, [pts], 1) for an int polygon (shift 0, LINE_8), OpenCV 4.11
    (CollectPolyEdges + FillEdgeCollection): each edge's outline drawn with Line; the edge for
    the scanlines goes through its ends clipped to the image (when an end lies outside), x in
    16.16 fixed point, dx = C division, active on rows [y0, y1); each row filled from
    ceil(x_left) to floor(x_right)."""
    h, w = mask.shape
    n = len(pts)
    edges = []
    for i in range(n):
        p0 = (int(pts[i - 1][0]), int(pts[i - 1][1]))
        p1 = (int(pts[i][0]), int(pts[i][1]))
        _line8(mask, p0, p1)
        c0y, c1y = p0[1], p1[1]
        t0, t1 = p0, p1
        if not (0 <= t0[0] < w and 0 <= t1[0] < w and 0 <= t0[1] < h and 0 <= t1[1] < h):
            _, t0, t1 = _clip_line(w, h, t0, t1)
            if t0[1] != t1[1]:
                c0y, c1y = t0[1], t1[1]
        c0x, c1x = t0[0] << 16, t1[0] << 16
        if p0[1] == p1[1]:
            continue
        dx = _cdiv(c1x - c0x, c1y - c0y)
        if p0[1] < p1[1]:
            edges.append((p0[1], p1[1], c0x + (p0[1] - c0y) * dx, dx))
        else:
            edges.append((p1[1], p0[1], c1x + (p1[1] - c1y) * dx, dx))
    if len(edges) < 2:
        return
    for y in range(max(0, min(e[0] for e in edges)), min(h, max(e[1] for e in edges))):
        xs = sorted(e[2] + (y - e[0]) * e[3] for e in edges if e[0] <= y < e[1])
        for a, b in zip(xs[0::2], xs[1::2]):
            xa = (a + 65535) >> 16
            xb = b >> 16
            if xa < w and xb >= 0:
                mask[y, max(xa, 0):min(xb, w - 1) + 1] = 1


def box_score_fast(pred, box):
    """Mean of the probability map over the box polygon (cv2.fillPoly + cv2.mean), computed
    inside the box's clipped bounding rectangle."""
    h, w = pred.shape
    xmin = int(np.clip(np.floor(box[:, 0].min()), 0, w - 1))
    xmax = int(np.clip(np.ceil(box[:, 0].max()), 0, w - 1))
    ymin = int(np.clip(np.floor(box[:, 1].min()), 0, h - 1))
    ymax = int(np.clip(np.ceil(box[:, 1].max()), 0, h - 1))
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), np.uint8)
    local = (box - np.array([xmin, ymin], F32)).astype(F32)
    fill_poly(mask, np.trunc(local).astype(np.int64))          # .astype(np.int32): toward zero
    sel = pred[ymin:ymax + 1, xmin:xmax + 1][mask.astype(bool)]
    return float(np.sum(sel, dtype=np.float64) / sel.size) if sel.size else 0.0


def geos_area_length(box):
    """shapely Polygon(box).area / .length (GEOS): shoelace with x shifted by the first x;
    perimeter as a sum of sqrt(dx*dx + dy*dy), ring closed."""
    p = box.astype(np.float64)
    ring = np.vstack([p, p[:1]])
    n = len(ring)
    x0 = ring[0, 0]
    s = 0.0
    for i in range(1, n - 1):
        x = ring[i, 0] - x0
        s += x * (ring[i - 1, 1] - ring[i + 1, 1])
    area = abs(s / 2.0)
    length = 0.0
    for i in range(n - 1):
        dx = ring[i + 1, 0] - ring[i, 0]
        dy = ring[i + 1, 1] - ring[i, 1]
        length += math.sqrt(dx * dx + dy * dy)
    return area, length


def _round_half_away(v):
    return int(v - 0.5) if v < 0 else int(v + 0.5)


def clipper_offset_round(points, delta, arc_tolerance=0.25):
    """pyclipper.PyclipperOffset(): AddPath(points, JT_ROUND, ET_CLOSEDPOLYGON), Execute(delta)
    (Clipper 6.4.2 ClipperOffset, delta > 0), for a simple polygon. Coordinates are truncated
    to integers on input (pyclipper). Returns the raw offset points (the package then unions
    them, which for this convex outline only drops collinear points and re-starts the ring:
    the rectangle taken next depends on the point set's hull only)."""
    pts = [(int(p[0]), int(p[1])) for p in points]              # float -> cInt: toward zero
    path = [pts[0]]
    hi = len(pts) - 1
    while hi > 0 and pts[0] == pts[hi]:
        hi -= 1
    for q in pts[1:hi + 1]:
        if q != path[-1]:
            path.append(q)
    if len(path) < 3:
        return np.zeros((0, 2), np.int64)
    # FixOrientations: Clipper wants the outer ring with positive area (Orientation()).
    a2 = sum(path[i - 1][0] * path[i][1] - path[i][0] * path[i - 1][1] for i in range(len(path)))
    if a2 < 0:
        path = path[::-1]
    if arc_tolerance <= 0:
        y = 0.25
    elif arc_tolerance > abs(delta) * 0.25:
        y = abs(delta) * 0.25
    else:
        y = arc_tolerance
    steps = math.pi / math.acos(1 - y / abs(delta))
    if steps > abs(delta) * math.pi:
        steps = abs(delta) * math.pi
    sin_s, cos_s = math.sin(2 * math.pi / steps), math.cos(2 * math.pi / steps)
    steps_per_rad = steps / (2 * math.pi)
    n = len(path)
    normals = []
    for j in range(n):
        p1, p2 = path[j], path[(j + 1) % n]
        if p1 == p2:
            normals.append((0.0, 0.0))
            continue
        dx, dy = float(p2[0] - p1[0]), float(p2[1] - p1[1])
        f = 1 * 1.0 / math.sqrt(dx * dx + dy * dy)
        dx *= f
        dy *= f
        normals.append((dy, -dx))
    out = []
    k = n - 1
    for j in range(n):
        sx, sy = path[j]
        nk, nj = normals[k], normals[j]
        sin_a = nk[0] * nj[1] - nj[0] * nk[1]
        if abs(sin_a * delta) < 1.0:
            cos_a = nk[0] * nj[0] + nj[1] * nk[1]
            if cos_a > 0:
                out.append((_round_half_away(sx + nk[0] * delta), _round_half_away(sy + nk[1] * delta)))
                k = j
                continue
        elif sin_a > 1.0:
            sin_a = 1.0
        elif sin_a < -1.0:
            sin_a = -1.0
        if sin_a * delta < 0:
            out.append((_round_half_away(sx + nk[0] * delta), _round_half_away(sy + nk[1] * delta)))
            out.append((sx, sy))
            out.append((_round_half_away(sx + nj[0] * delta), _round_half_away(sy + nj[1] * delta)))
        else:  # DoRound
            a = math.atan2(sin_a, nk[0] * nj[0] + nk[1] * nj[1])
            st = max(_round_half_away(steps_per_rad * abs(a)), 1)
            X, Y = nk
            for _ in range(st):
                out.append((_round_half_away(sx + X * delta), _round_half_away(sy + Y * delta)))
                X, Y = X * cos_s - sin_s * Y, X * sin_s + Y * cos_s
            out.append((_round_half_away(sx + nj[0] * delta), _round_half_away(sy + nj[1] * delta)))
        k = j
    return np.array(out, np.int64)


def unclip(box):
    area, length = geos_area_length(box)
    distance = area * UNCLIP_RATIO / length
    return clipper_offset_round(box, distance)


def order_points_clockwise(pts):
    """[tl, tr, br, bl]: the two smallest x (ties: stable) are the left pair, each pair by y."""
    xs = pts[np.argsort(pts[:, 0], kind="stable")]
    left = xs[:2][np.argsort(xs[:2, 1], kind="stable")]
    right = xs[2:][np.argsort(xs[2:, 1], kind="stable")]
    return np.array([left[0], right[0], right[1], left[1]], F32)


def db_postprocess(prob, src_h, src_w):
    """DB boxes: prob [H, W] float32 -> (int boxes in the detector's input image, scores)."""
    import cv2

    height, width = prob.shape
    seg = (prob > F32(THRESH)).astype(np.uint8)         # float32 compare with float32(0.3)
    mask = dilate2x2(seg)
    contours, _ = cv2.findContours(mask * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    boxes, scores = [], []
    for contour in contours[:MAX_CANDIDATES]:
        points, sside = mini_box(contour)
        if sside < MIN_SIZE:
            continue
        score = box_score_fast(prob, points.reshape(-1, 2))
        if BOX_THRESH > score:
            continue
        expanded = unclip(points)
        if len(expanded) == 0:
            continue
        box, sside = mini_box(expanded.reshape(-1, 1, 2).astype(np.int32))
        if sside < MIN_SIZE + 2:
            continue
        box = box.astype(F32)
        box[:, 0] = np.clip(np.round(box[:, 0] / F32(width) * F32(src_w)), 0, src_w)
        box[:, 1] = np.clip(np.round(box[:, 1] / F32(height) * F32(src_h)), 0, src_h)
        boxes.append(box.astype(np.int32))
        scores.append(score)
    out_boxes, out_scores = [], []
    for box, score in zip(boxes, scores):                # filter_det_res
        box = order_points_clockwise(box)
        box[:, 0] = np.trunc(np.clip(box[:, 0], 0, src_w - 1))
        box[:, 1] = np.trunc(np.clip(box[:, 1], 0, src_h - 1))
        rw = int(np.sqrt(np.sum((box[0] - box[1]) ** 2, dtype=F32)))
        rh = int(np.sqrt(np.sum((box[0] - box[3]) ** 2, dtype=F32)))
        if rw <= 3 or rh <= 3:
            continue
        out_boxes.append(box)
        out_scores.append(score)
    return out_boxes, out_scores


def sort_boxes(boxes):
    """Top to bottom (stable sort on the first corner's y), cut into lines where consecutive
    y differ by >= 10, each line left to right (stable)."""
    if not boxes:
        return boxes
    b = np.array(boxes)
    y = b[:, 0, 1]
    order = np.argsort(y, kind="stable")
    b = b[order]
    line = np.concatenate([[0], np.cumsum(np.diff(b[:, 0, 1]) >= BOX_SORT_Y_THRESHOLD)])
    final = np.lexsort((b[:, 0, 0], line))
    return list(b[final])


# ------------------------------------------------------------------------------------------
# 4. Crops: cv2.getPerspectiveTransform + cv2.warpPerspective(INTER_CUBIC, BORDER_REPLICATE)
# ------------------------------------------------------------------------------------------

def lu_solve(a, b):
    """OpenCV hal::LU (Gaussian elimination, partial pivoting on |a|, d = -1/pivot)."""
    a = a.copy()
    b = b.copy()
    m = a.shape[0]
    for i in range(m):
        k = i
        for j in range(i + 1, m):
            if abs(a[j, i]) > abs(a[k, i]):
                k = j
        if abs(a[k, i]) < np.finfo(np.float64).eps * 10:
            raise ZeroDivisionError("singular")
        if k != i:
            a[[i, k], i:] = a[[k, i], i:]
            b[[i, k]] = b[[k, i]]
        d = -1 / a[i, i]
        for j in range(i + 1, m):
            alpha = a[j, i] * d
            for kk in range(i + 1, m):
                a[j, kk] += alpha * a[i, kk]
            b[j] += alpha * b[i]
    for i in range(m - 1, -1, -1):
        s = b[i]
        for kk in range(i + 1, m):
            s -= a[i, kk] * b[kk]
        b[i] = s / a[i, i]
    return b


def perspective_transform(src, dst):
    """cv2.getPerspectiveTransform(src, dst) (float32 points; DECOMP_LU): 3x3 float64."""
    a = np.zeros((8, 8))
    b = np.zeros(8)
    for i in range(4):
        sx, sy = F32(src[i][0]), F32(src[i][1])
        dx, dy = F32(dst[i][0]), F32(dst[i][1])
        a[i, 0] = a[i + 4, 3] = sx
        a[i, 1] = a[i + 4, 4] = sy
        a[i, 2] = a[i + 4, 5] = 1
        a[i, 6] = -sx * dx                 # float32 products
        a[i, 7] = -sy * dx
        a[i + 4, 6] = -sx * dy
        a[i + 4, 7] = -sy * dy
        b[i] = dx
        b[i + 4] = dy
    x = lu_solve(a, b)
    return np.append(x, 1.0).reshape(3, 3)


def invert3(m):
    """cv::invert for a 3x3 double matrix (DECOMP_LU's closed form: adjugate times 1/det)."""
    s = m
    d = (s[0, 0] * (s[1, 1] * s[2, 2] - s[1, 2] * s[2, 1])
         - s[0, 1] * (s[1, 0] * s[2, 2] - s[1, 2] * s[2, 0])
         + s[0, 2] * (s[1, 0] * s[2, 1] - s[1, 1] * s[2, 0]))
    if d == 0:
        return np.zeros((3, 3))
    d = 1.0 / d
    t = np.empty((3, 3))
    t[0, 0] = (s[1, 1] * s[2, 2] - s[1, 2] * s[2, 1]) * d
    t[0, 1] = (s[0, 2] * s[2, 1] - s[0, 1] * s[2, 2]) * d
    t[0, 2] = (s[0, 1] * s[1, 2] - s[0, 2] * s[1, 1]) * d
    t[1, 0] = (s[1, 2] * s[2, 0] - s[1, 0] * s[2, 2]) * d
    t[1, 1] = (s[0, 0] * s[2, 2] - s[0, 2] * s[2, 0]) * d
    t[1, 2] = (s[0, 2] * s[1, 0] - s[0, 0] * s[1, 2]) * d
    t[2, 0] = (s[1, 0] * s[2, 1] - s[1, 1] * s[2, 0]) * d
    t[2, 1] = (s[0, 1] * s[2, 0] - s[0, 0] * s[2, 1]) * d
    t[2, 2] = (s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]) * d
    return t


def _cubic_coeffs(x):
    """interpolateCubic (A = -0.75), float32 arithmetic."""
    A = F32(-0.75)
    x = F32(x)
    one = F32(1)
    c0 = ((A * (x + one) - F32(5) * A) * (x + one) + F32(8) * A) * (x + one) - F32(4) * A
    c1 = ((A + F32(2)) * x - (A + F32(3))) * x * x + one
    c2 = ((A + F32(2)) * (one - x) - (A + F32(3))) * (one - x) * (one - x) + one
    c3 = one - c0 - c1 - c2
    return [F32(c0), F32(c1), F32(c2), F32(c3)]


def _cubic_tab2d():
    """initInterTab2D(INTER_CUBIC, fixpt): 32x32 fractions x 4x4 short weights summing to 32768
    (rounding error put on the largest / smallest of the 4 middle taps)."""
    tab1 = [_cubic_coeffs(F32(i) * F32(1.0 / 32)) for i in range(32)]
    out = np.zeros((32 * 32, 16), np.int64)
    for i in range(32):
        for j in range(32):
            vy, vx = tab1[i], tab1[j]
            it = [int(np.rint(F32(vy[k1] * vx[k2]) * F32(32768))) for k1 in range(4) for k2 in range(4)]
            diff = sum(it) - 32768
            if diff != 0:
                mk = Mk = (2, 2)
                for k1 in (2, 3):
                    for k2 in (2, 3):
                        v = it[k1 * 4 + k2]
                        if v < it[mk[0] * 4 + mk[1]]:
                            mk = (k1, k2)
                        elif v > it[Mk[0] * 4 + Mk[1]]:
                            Mk = (k1, k2)
                if diff < 0:
                    it[Mk[0] * 4 + Mk[1]] -= diff
                else:
                    it[mk[0] * 4 + mk[1]] -= diff
            out[i * 32 + j] = it
    return out


_CUBIC_TAB = None


def warp_perspective_cubic(img, m, dw, dh):
    """cv2.warpPerspective(img, m, (dw, dh), flags=INTER_CUBIC, borderMode=BORDER_REPLICATE):
    inverse map, source position per pixel in 1/32 px (rounded to nearest, ties even), 4x4
    fixed-point cubic weights, (sum + 2^14) >> 15, clamped to 0..255."""
    global _CUBIC_TAB
    if _CUBIC_TAB is None:
        _CUBIC_TAB = _cubic_tab2d()
    M = invert3(m).ravel()
    sh, sw = img.shape[:2]
    # OpenCV walks the output in blocks: rows of bh0, columns of bw0; X0 etc. per block row
    bh0 = min(32 // 2, dh)
    bw0 = min(32 * 32 // bh0, dw)
    bh0 = min(32 * 32 // bw0, dh)
    X = np.empty((dh, dw), np.int64)
    Y = np.empty((dh, dw), np.int64)
    for y in range(0, dh, bh0):
        for x in range(0, dw, bw0):
            bw = min(bw0, dw - x)
            bh = min(bh0, dh - y)
            x1 = np.arange(bw, dtype=np.float64)
            for y1 in range(bh):
                X0 = M[0] * x + M[1] * (y + y1) + M[2]
                Y0 = M[3] * x + M[4] * (y + y1) + M[5]
                W0 = M[6] * x + M[7] * (y + y1) + M[8]
                W = W0 + M[6] * x1
                W = np.where(W != 0, 32 / np.where(W != 0, W, 1), 0)
                fX = np.clip((X0 + M[0] * x1) * W, -2147483648.0, 2147483647.0)
                fY = np.clip((Y0 + M[3] * x1) * W, -2147483648.0, 2147483647.0)
                X[y + y1, x:x + bw] = np.rint(fX).astype(np.int64)
                Y[y + y1, x:x + bw] = np.rint(fY).astype(np.int64)
    ix, iy = X >> 5, Y >> 5
    # saturate_cast<short> on the integer part
    ix = np.clip(ix, -32768, 32767)
    iy = np.clip(iy, -32768, 32767)
    frac = (Y & 31) * 32 + (X & 31)
    w = _CUBIC_TAB[frac]                                   # [dh, dw, 16]
    src = img.astype(np.int64)
    acc = np.zeros((dh, dw, img.shape[2]), np.int64)
    for k1 in range(4):
        ry = np.clip(iy - 1 + k1, 0, sh - 1)
        for k2 in range(4):
            rx = np.clip(ix - 1 + k2, 0, sw - 1)
            acc += src[ry, rx] * w[:, :, k1 * 4 + k2, None]
    return np.clip((acc + (1 << 14)) >> 15, 0, 255).astype(np.uint8)


def crop(img, box):
    """get_rotate_crop_image: the quadrilateral warped to an upright rectangle; turned 90 degrees
    counter-clockwise when height / width >= 1.5."""
    box = box.astype(F32)

    def norm(v):
        return F32(np.sqrt(np.sum(v.astype(F32) ** 2, dtype=F32)))

    cw = int(max(norm(box[0] - box[1]), norm(box[2] - box[3])))
    ch = int(max(norm(box[0] - box[3]), norm(box[1] - box[2])))
    dst = np.array([[0, 0], [cw, 0], [cw, ch], [0, ch]], F32)
    m = perspective_transform(box, dst)
    out = warp_perspective_cubic(img, m, cw, ch)
    if out.shape[0] * 1.0 / out.shape[1] >= 1.5:
        out = np.rot90(out)
    return out


# ------------------------------------------------------------------------------------------
# 5. Classification (0 / 180 degrees) and 6. recognition
# ------------------------------------------------------------------------------------------

def norm_padded(img, height, width, max_width):
    """resize to (width, height) INTER_LINEAR, float32 v/255, -0.5, /0.5 (all float32), CHW,
    zero-padded on the right to max_width."""
    r = resize_linear(img, width, height).astype(F32)
    r = r.transpose(2, 0, 1) / F32(255)
    r = (r - F32(0.5)) / F32(0.5)
    out = np.zeros((3, height, max_width), F32)
    out[:, :, :width] = r
    return out


def classify(sess, crops):
    """Batches of 6 in order of w/h; a crop labelled 180 with score > 0.9 is turned 180 deg."""
    crops = list(crops)
    ratios = np.array([c.shape[1] / float(c.shape[0]) for c in crops])
    order = np.argsort(ratios, kind="stable")
    _, h, w = CLS_SHAPE
    for beg in range(0, len(crops), CLS_BATCH):
        idx = order[beg:beg + CLS_BATCH]
        batch = []
        for i in idx:
            ch, cw = crops[i].shape[:2]
            ratio = cw / float(ch)
            rw = w if math.ceil(h * ratio) > w else int(math.ceil(h * ratio))
            batch.append(norm_padded(crops[i], h, rw, w))
        prob = sess.run(None, {sess.get_inputs()[0].name: np.stack(batch)})[0]
        for k, i in enumerate(idx):
            label = int(np.argmax(prob[k]))
            if label == 1 and prob[k, label] > CLS_THRESH:
                crops[i] = crops[i][::-1, ::-1]          # cv2.rotate(ROTATE_180)
    return crops


def ctc_decode(probs, chars):
    """Greedy CTC: argmax per step (first maximum), drop repeats and blanks (0); score = mean
    of the kept steps' max probabilities each rounded to 5 decimals, then rounded to 5 (0 if
    none kept)."""
    idx = probs.argmax(axis=1)
    mx = probs.max(axis=1)
    keep = np.ones(len(idx), bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    conf = [round(float(c), 5) for c in mx[keep]] or [0]
    text = "".join(chars[i] for i in idx[keep])
    return text, float(np.mean(conf).round(5))


def recognize(sess, crops, chars):
    ratios = np.array([c.shape[1] / float(c.shape[0]) for c in crops])
    order = np.argsort(ratios, kind="stable")
    _, h, w = REC_SHAPE
    out = [None] * len(crops)
    for beg in range(0, len(crops), REC_BATCH):
        idx = order[beg:beg + REC_BATCH]
        max_ratio = w / h
        for i in idx:
            ch, cw = crops[i].shape[:2]
            max_ratio = max(max_ratio, cw * 1.0 / ch)
        width = int(h * max_ratio)
        batch = []
        for i in idx:
            ch, cw = crops[i].shape[:2]
            ratio = cw / float(ch)
            rw = width if math.ceil(h * ratio) > width else int(math.ceil(h * ratio))
            batch.append(norm_padded(crops[i], h, rw, width))
        prob = sess.run(None, {sess.get_inputs()[0].name: np.stack(batch)})[0]
        for k, i in enumerate(idx):
            out[i] = ctc_decode(prob[k], chars)
    return out


# ------------------------------------------------------------------------------------------
# The whole pipeline
# ------------------------------------------------------------------------------------------

class Ocr:
    def __init__(self, threads=1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.enable_cpu_mem_arena = False
        p = ["CPUExecutionProvider"]
        self.det = ort.InferenceSession(os.path.join(CACHE, "ocr_det.onnx"), opts, providers=p)
        self.cls = ort.InferenceSession(os.path.join(CACHE, "ocr_cls.onnx"), opts, providers=p)
        self.rec = ort.InferenceSession(os.path.join(CACHE, "ocr_rec.onnx"), opts, providers=p)
        keys = self.rec.get_modelmeta().custom_metadata_map["character"].splitlines()
        self.chars = ["blank"] + keys + [" "]            # index 0 = CTC blank, last = space

    def __call__(self, bgr):
        """bgr: HxWx3 uint8 in BGR order. Returns [(box 4x2 float32, text, score)]."""
        ori_h, ori_w = bgr.shape[:2]
        img, ratio_h, ratio_w = bound_image(bgr)
        img, top = vertical_padding(img)
        x = det_input(img)
        if x is None:
            return []
        prob = self.det.run(None, {self.det.get_inputs()[0].name: x})[0][0, 0]
        boxes, _ = db_postprocess(prob, img.shape[0], img.shape[1])
        if not boxes:
            return []
        boxes = sort_boxes(boxes)
        crops = [crop(img, b) for b in boxes]
        crops = classify(self.cls, crops)
        texts = recognize(self.rec, crops, self.chars)
        out = []
        for box, (text, score) in zip(boxes, texts):
            b = box.astype(F32).copy()
            b[:, 1] -= F32(top)
            b[:, 0] *= F32(ratio_w)
            b[:, 1] *= F32(ratio_h)
            b = np.where(b < 0, F32(0), b)
            b[:, 0] = np.where(b[:, 0] > ori_w, F32(ori_w), b[:, 0])
            b[:, 1] = np.where(b[:, 1] > ori_h, F32(ori_h), b[:, 1])
            if not text.strip():
                continue
            if score < TEXT_SCORE:
                continue
            out.append((b, text, score))
        return out


def load_bgr(path):
    from PIL import Image

    with Image.open(path) as image:
        image.seek(0)
        return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


# ------------------------------------------------------------------------------------------
# checks
# ------------------------------------------------------------------------------------------

def check_parts():
    import cv2
    import pyclipper

    rng = np.random.default_rng(1)
    bad = 0
    # resize
    sizes = [(1, 1), (2, 3), (7, 5), (31, 17), (48, 20), (100, 37), (640, 480), (352, 48), (123, 48)]
    n = 0
    for sw, sh in sizes:
        src = rng.integers(0, 256, (sh, sw, 3), dtype=np.uint8)
        for dw, dh in [(sw * 2, sh * 2), (max(1, sw // 2), max(1, sh // 2)), (sw * 3 + 1, sh + 5),
                       (192, 48), (32, 48), (736, 736), (max(1, sw - 1), sh + 1), (sw * 7 // 3 + 1, sh * 5 // 2 + 1)]:
            n += 1
            a = resize_linear(src, dw, dh)
            b = cv2.resize(src, (dw, dh))
            if not np.array_equal(a, b):
                bad += 1
                print(f"resize {sw}x{sh} -> {dw}x{dh}: max diff {np.abs(a.astype(int) - b).max()}, "
                      f"{np.count_nonzero(a != b)} values")
    print(f"resize_linear: {n} cases")
    # dilation
    for _ in range(20):
        m = (rng.random((37, 53)) > 0.8).astype(np.uint8)
        if not np.array_equal(dilate2x2(m), cv2.dilate(m, np.array([[1, 1], [1, 1]]))):
            bad += 1
            print("dilate differs")
    print("dilate2x2: 20 cases")
    # fillPoly: random quads (rotated rectangles), partly outside
    n = 0
    for _ in range(3000):
        h, w = int(rng.integers(3, 40)), int(rng.integers(3, 60))
        c = rng.uniform(-5, [w + 5, h + 5])
        size = rng.uniform(1, 40, 2)
        ang = rng.uniform(0, 90)
        pts = cv2.boxPoints(((float(c[0]), float(c[1])), (float(size[0]), float(size[1])), float(ang))).astype(np.int32)
        if rng.random() < 0.3:
            pts = rng.integers(-5, 60, (4, 2)).astype(np.int32)
        a = np.zeros((h, w), np.uint8)
        b = np.zeros((h, w), np.uint8)
        fill_poly(a, pts.astype(np.int64))
        cv2.fillPoly(b, pts.reshape(1, -1, 2), 1)
        n += 1
        if not np.array_equal(a, b):
            bad += 1
            if bad < 10:
                print("fillPoly differs", pts.tolist(), (h, w), np.argwhere(a != b)[:5].tolist())
    print(f"fill_poly: {n} cases")
    # unclip (area / length / Clipper offset) -> same minAreaRect as pyclipper's output
    n = 0
    bad_offset = 0
    from shapely.geometry import Polygon

    for _ in range(3000):
        c = rng.uniform(0, 800, 2)
        size = rng.uniform(1, 300, 2) * np.array([1, rng.uniform(0.05, 1)])
        ang = rng.uniform(0, 90) if rng.random() < 0.5 else 90.0
        box = cv2.boxPoints(((float(c[0]), float(c[1])), (float(size[0]), float(size[1])), float(ang)))
        poly = Polygon(box)
        area, length = geos_area_length(box)
        if (area, length) != (poly.area, poly.length):
            bad += 1
            print("GEOS area/length differ", area, poly.area, length, poly.length)
        d = poly.area * UNCLIP_RATIO / poly.length
        off = pyclipper.PyclipperOffset()
        off.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        ref = np.array(off.Execute(d)).reshape(-1, 2)
        mine = clipper_offset_round(box, d)
        n += 1
        # the package's union drops collinear points: compare the rectangles taken from them
        b1, s1 = mini_box(ref.reshape(-1, 1, 2).astype(np.int32))
        b2, s2 = mini_box(mine.reshape(-1, 1, 2).astype(np.int32))
        if set(map(tuple, ref.tolist())) - set(map(tuple, mine.tolist())) or not np.array_equal(b1, b2) or s1 != s2:
            bad_offset += 1
            if bad_offset < 5:
                print("offset differs", box.tolist(), d, len(ref), len(mine), b1.tolist(), b2.tolist())
    print(f"clipper_offset_round: {n} cases, {bad_offset} differ")
    bad += bad_offset
    # perspective transform + cubic warp
    n = 0
    bad_warp = 0
    for _ in range(300):
        h, w = int(rng.integers(20, 120)), int(rng.integers(20, 200))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        c = rng.uniform(0, [w, h])
        size = rng.uniform(4, 80, 2)
        ang = rng.uniform(0, 90) if rng.random() < 0.5 else 90.0
        pts = np.round(cv2.boxPoints(((float(c[0]), float(c[1])), (float(size[0]), float(size[1])), float(ang))))
        box = order_points_clockwise(pts.astype(np.int32))
        cw = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
        ch = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
        if cw < 1 or ch < 1:
            continue
        dst = np.array([[0, 0], [cw, 0], [cw, ch], [0, ch]], F32)
        m_ref = cv2.getPerspectiveTransform(box, dst)
        m = perspective_transform(box, dst)
        ref = cv2.warpPerspective(img, m_ref, (cw, ch), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
        mine = warp_perspective_cubic(img, m, cw, ch)
        n += 1
        if not np.array_equal(m, m_ref) or not np.array_equal(ref, mine):
            bad_warp += 1
            if bad_warp < 5:
                print(f"warp differs: M max diff {np.abs(m - m_ref).max():.3g}, pixels "
                      f"{np.count_nonzero(ref != mine)} of {ref.size}, max {np.abs(ref.astype(int) - mine).max()}")
    print(f"perspective_transform + warp_perspective_cubic: {n} cases, {bad_warp} differ")
    bad += bad_warp
    print("check-parts:", "all equal" if bad == 0 else f"{bad} differences")
    return bad == 0


def check_contours():
    """On every detection map of the test set: (1) the numpy rectangle (min_area_rect_np) vs
    cv2.minAreaRect through the whole box computation; (2) how many kept boxes come from hole
    contours (RETR_LIST returns holes too; a port that traces outer borders only would miss them)."""
    import cv2

    with open(os.path.join(HERE, "ocr_reference.json")) as f:
        names = sorted(json.load(f))
    ocr = Ocr()
    n_contours = n_kept = differ = holes_kept = 0
    for name in names:
        img, _, _ = bound_image(load_bgr(os.path.join(HERE, "build", "ocr_set", name)))
        img, _ = vertical_padding(img)
        x = det_input(img)
        prob = ocr.det.run(None, {ocr.det.get_inputs()[0].name: x})[0][0, 0]
        mask = dilate2x2((prob > F32(THRESH)).astype(np.uint8))
        contours, hier = cv2.findContours(mask * 255, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
        height, width = prob.shape
        for k, contour in enumerate(contours):
            n_contours += 1
            results = []
            for rect in (min_area_rect, min_area_rect_np):
                points, sside = mini_box(contour, rect)
                if sside < MIN_SIZE:
                    results.append(None)
                    continue
                score = box_score_fast(prob, points.reshape(-1, 2))
                if BOX_THRESH > score:
                    results.append(None)
                    continue
                box, sside = mini_box(unclip(points).reshape(-1, 1, 2).astype(np.int32), rect)
                if sside < MIN_SIZE + 2:
                    results.append(None)
                    continue
                box = box.astype(F32)
                box[:, 0] = np.clip(np.round(box[:, 0] / F32(width) * F32(img.shape[1])), 0, img.shape[1])
                box[:, 1] = np.clip(np.round(box[:, 1] / F32(height) * F32(img.shape[0])), 0, img.shape[0])
                results.append(box.astype(np.int32).tolist())
            if results[0] is not None:
                n_kept += 1
                if hier[0][k][3] != -1:
                    holes_kept += 1
            if results[0] != results[1]:
                differ += 1
                print(f"{name}: contour {k}: cv2 {results[0]} numpy {results[1]}")
    print(f"check-contours: {len(names)} maps, {n_contours} contours, {n_kept} boxes kept, "
          f"{holes_kept} of them from hole contours; numpy rectangle differs on {differ}")
    return differ == 0


def check():
    with open(os.path.join(HERE, "ocr_reference.json")) as f:
        ref = json.load(f)
    ocr = Ocr()
    worst_box = 0.0
    worst_score = 0.0
    bad = 0
    for name in sorted(ref):
        got = ocr(load_bgr(os.path.join(HERE, "build", "ocr_set", name)))
        r = ref[name]
        texts = [t for _, t, _ in got]
        ok = texts == r["txts"]
        if ok and texts:
            db = float(np.max(np.abs(np.array([b for b, _, _ in got]) - np.array(r["boxes"]))))
            ds = float(np.max(np.abs(np.array([s for _, _, s in got]) - np.array(r["scores"]))))
            worst_box = max(worst_box, db)
            worst_score = max(worst_score, ds)
            ok = db <= 1.0
        if not ok:
            bad += 1
            print(f"{name}: DIFFERS\n  spec {texts}\n  ref  {r['txts']}")
    print(f"check: {len(ref)} images, {bad} differ; max box diff {worst_box} px, max score diff {worst_score:.2g}")
    return bad == 0


def main():
    args = sys.argv[1:]
    if args == ["check-parts"]:
        sys.exit(0 if check_parts() else 1)
    if args == ["check"]:
        sys.exit(0 if check() else 1)
    if args == ["check-contours"]:
        sys.exit(0 if check_contours() else 1)
    ocr = Ocr()
    for path in args:
        for box, text, score in ocr(load_bgr(path)):
            print(f"{path}\t{score:.5f}\t{text}\t{box.astype(int).tolist()}")


if __name__ == "__main__":
    main()
