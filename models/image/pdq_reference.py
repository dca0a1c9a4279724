#!/usr/bin/env python3
"""PDQ hashes of the committed test images by Meta's reference implementation.

The `pdqhash` bindings (PyPI, requirements-pdq.txt) wrap Meta's C++ PDQ; this script hashes
every test image at full size (and as Meta's Python tool does, within 512 x 512) and writes `pdq_reference.json`, which the Rust tests
(`src/image/hashes.rs`) compare with the `pdqhash` crate's hashes of the same files.

Pixels: Pillow decodes, converted to RGB the way modgate's decoders see the file (alpha
composited over black is what `convert("RGB")` does for RGBA; palettes expanded; the first
frame of an animation). Files whose pixels two decoders may legitimately disagree on are
left out: alpha (modgate composites over white), EXIF rotation (modgate applies it).

    python3 -m venv /tmp/pdq && /tmp/pdq/bin/pip install -r requirements-pdq.txt
    /tmp/pdq/bin/python pdq_reference.py
"""
import json
import pathlib

import numpy as np
import pdqhash
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
IMAGES = HERE / "testimages"
SKIP = ("rgba", "alpha", "transparent", "exif", "orientation")


def hex_of(bits):
    return "%064x" % int("".join(str(int(b)) for b in bits), 2)


def main():
    rows = []
    for path in sorted(IMAGES.iterdir()):
        if path.suffix not in (".jpg", ".png", ".webp", ".gif"):
            continue
        if any(word in path.name for word in SKIP):
            continue
        with Image.open(path) as image:
            image.seek(0)
            pixels = np.asarray(image.convert("RGB"))
        if min(pixels.shape[:2]) < 5:
            continue
        bits, quality = pdqhash.compute(pixels)
        # As Meta's Python PDQ tool (pdq/python, pdq_hasher.py) hashes a file: brought within
        # 512 x 512 by Pillow's thumbnail (aspect kept) first.
        with Image.open(path) as image:
            image.seek(0)
            small = image.convert("RGB")
            small.thumbnail((512, 512))
        bits_512, _ = pdqhash.compute(np.asarray(small))
        rows.append(
            {
                "file": path.name,
                "pdq": hex_of(bits),
                "quality": int(quality),
                "pdq_512": hex_of(bits_512),
            }
        )
    out = {
        "made_by": "models/image/pdq_reference.py with pdqhash==0.2.8 (Meta's C++ PDQ)",
        "images": rows,
    }
    (HERE / "pdq_reference.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(rows)} images")


if __name__ == "__main__":
    main()
