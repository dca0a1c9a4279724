#!/usr/bin/env python3
"""Deterministically synthesize a 12 MP (4000x3000, 4:3) baseline JPEG for benchmarks.

NOT committed (too big): run `make_large.py [OUT]` (default build/large_12mp.jpg).
Source: scikit-image's coffee.png (CC0), centre-cropped to 4:3, upscaled with LANCZOS, plus
fixed-seed Gaussian noise (sigma 6) so the file has photo-like entropy (a plain upscale
compresses and decodes unrealistically fast). Saved by Pillow 12.1.1 (libjpeg-turbo 3.1.3):
quality 90, 4:2:0, baseline, no optimize. Same versions -> same bytes (sha256 printed).
"""
import hashlib
import sys
from pathlib import Path

import numpy as np
import PIL
from PIL import Image
import skimage

assert PIL.__version__ == "12.1.1", PIL.__version__
assert skimage.__version__ == "0.25.2", skimage.__version__

HERE = Path(__file__).resolve().parent
out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "build" / "large_12mp.jpg"
out.parent.mkdir(parents=True, exist_ok=True)

src = Image.open(Path(skimage.data.__file__).parent / "coffee.png").convert("RGB")  # 600x400
w, h = src.size
cw = h * 4 // 3  # 533
x0 = (w - cw) // 2
img = src.crop((x0, 0, x0 + cw, h)).resize((4000, 3000), Image.Resampling.LANCZOS)
a = np.asarray(img).astype(np.int16)
noise = np.random.default_rng(12345).normal(0.0, 6.0, size=a.shape).round().astype(np.int16)
a = np.clip(a + noise, 0, 255).astype(np.uint8)
Image.fromarray(a, "RGB").save(out, format="JPEG", quality=90, subsampling=2,
                               progressive=False, optimize=False)
d = hashlib.sha256(out.read_bytes()).hexdigest()
print(f"{out} {out.stat().st_size} bytes 4000x3000 sha256 {d}")
