#!/usr/bin/env python3
"""Check nsfwjs_inception_v3.onnx (made by models/fetch.py with convert_tfjs.py) against the
ORIGINAL nsfwjs 4.3.0 InceptionV3 run by tfjs 4.22.0 (CPU backend) in node, on the same input
tensors, and time it. Numbers go to inception_v3.md by hand.

  verify_inception_v3.py [--onnx PATH] [--work DIR] [--skip-js] [DIR ...]

DIRs default to testimages/ and safe/*/. For each DIR, js/reference_nsfwjs.mjs --model
InceptionV3 writes WORK/<name>.json (the 5 probabilities nsfwjs's classify() returns),
WORK/t_<name>/<file>.f32 (the float32 [1,299,299,3] tensor nsfwjs passed to model.predict) and
WORK/rgb_<name>/<file>.ppm (the decoded pixels); --skip-js reuses them. Then:
  1. ONNX Runtime (CPU, 1 thread) on each dumped tensor vs the tfjs probabilities: max |diff|.
  2. spec_preprocess.nsfwjs_input(rgb, 299) vs the dumped tensor: bit-identical or not.
  3. Timing: one 299x299 image, process CPU ms of session.run with 1 intra-op thread, median
     of 20 (after 3 warm-up runs).
Needs the venv (.venv: numpy, onnxruntime) and js/node_modules (npm ci in js/).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import spec_preprocess as spec  # noqa: E402

KEYS = ["drawing", "hentai", "neutral", "porn", "sexy"]  # = output order Drawing..Sexy
SIZE = 299


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--onnx", default=str(HERE.parent / "cache" / "nsfwjs_inception_v3.onnx"))
    ap.add_argument("--work", default=str(HERE / "build" / "inception_v3"))
    ap.add_argument("--skip-js", action="store_true")
    a = ap.parse_args()
    dirs = [Path(d) for d in a.dirs] or [HERE / "testimages", *sorted(p for p in (HERE / "safe").glob("*") if p.is_dir())]
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    print(f"input {inp.name} {inp.shape} {inp.type}; output {out.name} {out.shape} {out.type}")

    worst = (0.0, None)
    per_dir = {}
    spec_mismatch = []
    n = 0
    for d in dirs:
        name = d.name
        if not a.skip_js:
            subprocess.run(["node", str(HERE / "js" / "reference_nsfwjs.mjs"), "--model", "InceptionV3",
                            "--out", str(work / f"{name}.json"), "--dump-tensors", str(work / f"t_{name}"),
                            "--dump-rgb", str(work / f"rgb_{name}"), str(d)], check=True)
        ref = json.loads((work / f"{name}.json").read_text())
        dmax = 0.0
        for f, probs in sorted(ref.items()):
            x = np.fromfile(work / f"t_{name}" / f"{f}.f32", np.float32).reshape(1, SIZE, SIZE, 3)
            got = sess.run(None, {inp.name: x})[0][0]
            want = np.array([probs[k] for k in KEYS], np.float64)
            diff = float(np.abs(got.astype(np.float64) - want).max())
            dmax = max(dmax, diff)
            if diff > worst[0]:
                worst = (diff, f"{name}/{f}")
            x_spec = spec.nsfwjs_input(spec.read_ppm(work / f"rgb_{name}" / f"{f}.ppm"), SIZE)
            if not np.array_equal(x_spec.view(np.uint32), x[0].view(np.uint32)):
                spec_mismatch.append(f"{name}/{f}")
            n += 1
        per_dir[name] = {"images": len(ref), "max_abs_diff": dmax}
        print(f"{name}: {len(ref)} images, max |onnx - tfjs| = {dmax:.3g}")

    # timing: a real 299x299 input, the first dumped tensor
    x = np.fromfile(sorted((work / f"t_{dirs[0].name}").glob("*.f32"))[0], np.float32).reshape(1, SIZE, SIZE, 3)
    for _ in range(3):
        sess.run(None, {inp.name: x})
    cpu, wall = [], []
    for _ in range(20):
        c0, w0 = time.process_time(), time.perf_counter()
        sess.run(None, {inp.name: x})
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - w0) * 1e3)
    summary = {
        "images": n, "max_abs_diff": worst[0], "worst": worst[1], "per_dir": per_dir,
        "spec_preprocess_bit_identical": n - len(spec_mismatch), "spec_mismatch": spec_mismatch,
        "cpu_ms_median_1thread": round(statistics.median(cpu), 1),
        "cpu_ms_min_max": [round(min(cpu), 1), round(max(cpu), 1)],
        "wall_ms_median": round(statistics.median(wall), 1),
        "onnxruntime": ort.__version__,
    }
    print(json.dumps(summary, indent=1))
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
