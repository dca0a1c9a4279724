#!/usr/bin/env python3
"""Reference scores of nsfwjs's InceptionV3 on the reference images, for tests/models.rs.

Pixels decoded by Pillow (`spec_preprocess.pillow_rgb`), the tensor made by
`spec_preprocess.nsfwjs_input(rgb, 299)` (bit-identical to the tensor nsfwjs 4.3.0 feeds its
model, checked by verify_inception_v3.py), run by ONNX Runtime on the converted model (within
1.2e-6 of tfjs on the same tensors, ibid.). Writes reference_scores_inception_v3.json:
{file: {drawing, hentai, neutral, porn, sexy}}.
"""
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

from spec_preprocess import nsfwjs_input, pillow_rgb

HERE = Path(__file__).resolve().parent
CLASSES = ["drawing", "hentai", "neutral", "porn", "sexy"]

options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(str(HERE.parent / "cache" / "nsfwjs_inception_v3.onnx"), options,
                               providers=["CPUExecutionProvider"])
scores = {}
for path in sorted((HERE / "testimages").iterdir()):
    if path.suffix in (".md", ".json", ".txt"):
        continue
    tensor = nsfwjs_input(pillow_rgb(path), 299).astype(np.float32)[None]
    row = session.run(None, {"input": tensor})[0][0]
    scores[path.name] = {c: float(v) for c, v in zip(CLASSES, row)}
(HERE / "reference_scores_inception_v3.json").write_text(json.dumps(scores, indent=1) + "\n")
print(f"{len(scores)} images")
