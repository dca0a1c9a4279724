#!/usr/bin/env python3
"""Can int8 versions of the two image models replace fp32? Measures, does not ship.

For open-NSFW and nsfwjs MobileNetV2 "mid", makes static int8 models with ONNX Runtime's own
tools (`onnxruntime.quantization.quantize_static`: QDQ format, per-channel int8 weights, uint8
activations, the U8S8 kernels ONNX Runtime uses on x86) calibrated on every reference and safe
image, then compares each int8 model with its fp32 original on the same images: the largest
and mean absolute difference of any output, whether any default-workflow decision changes,
and the process CPU time of one image with one intra-op thread (the server's setting).

Variants tried: MinMax and percentile calibration (99.99, 99.999), reduced-range weights,
uint8 weights, only Conv quantised, and each ResNet stage of open-NSFW kept in fp32 in turn
(`--all-variants`); the default run makes the best of them (percentile 99.999) only.

The acceptance rule (issue 13): an int8 model replaces fp32 only if on every image its
scores stay within 0.02 of fp32 and no decision changes. The result, written to
STATS.md's "int8" section by hand from this script's output, is that neither model passes.

Needs the venv of requirements.txt plus requirements-quant.txt, the
fetched models (`models/fetch.py`) and the safe photos (`fetch_safe_photos.sh`).
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import version_converter
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from spec_preprocess import nsfwjs_input, opennsfw_input, pillow_rgb  # noqa: E402

MODELS = {
    "open_nsfw": (HERE.parent / "cache" / "open-nsfw.onnx", opennsfw_input),
    "nsfwjs": (HERE / "nsfwjs_mid.onnx", nsfwjs_input),
}
# (review, reject) of the categories each model feeds in the default workflow
# (src/defaults/workflows.toml); a decision is the band a score falls in.
NUDITY = (0.75, 0.9)
SUGGESTIVE = (0.7, 0.9)
DRAWN = (0.6, 0.85)


def decisions(model: str, row: np.ndarray) -> tuple:
    def band(score: float, bounds: tuple) -> int:
        return int(score >= bounds[0]) + int(score >= bounds[1])

    if model == "open_nsfw":
        return (band(row[1], NUDITY),)
    drawing, hentai, neutral, porn, sexy = row
    return (band(porn, NUDITY), band(sexy, SUGGESTIVE), band(hentai, DRAWN))


def images() -> list[tuple[str, np.ndarray]]:
    files = sorted(glob.glob(str(HERE / "testimages" / "*")))
    files += sorted(glob.glob(str(HERE / "safe" / "*" / "*")))
    out = []
    for f in files:
        if f.endswith((".md", ".copyright", ".txt", ".json")):
            continue
        out.append((os.path.basename(f), pillow_rgb(f)))
    if len(out) < 90:
        sys.exit(f"only {len(out)} images: run fetch_safe_photos.sh first")
    return out


def session(path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def run(path: str, tensors: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """Every image's output row, and the median CPU ms of one image over 30 runs."""
    s = session(path)
    name = s.get_inputs()[0].name
    rows = np.array([s.run(None, {name: t})[0][0] for t in tensors])
    times = []
    for t in tensors[:30]:
        start = time.process_time()
        s.run(None, {name: t})
        times.append(time.process_time() - start)
    return rows, float(np.median(times)) * 1000


class Reader(CalibrationDataReader):
    def __init__(self, name: str, tensors: list[np.ndarray]):
        self.feeds = iter([{name: t} for t in tensors])

    def get_next(self):
        return next(self.feeds, None)


def variants(all_variants: bool, nodes: list[str]) -> dict[str, dict]:
    best = {"calibrate_method": CalibrationMethod.Percentile,
            "extra_options": {"CalibPercentile": 99.999}}
    if not all_variants:
        return {"percentile 99.999": best}
    out = {
        "minmax": {},
        "minmax, reduced range": {"reduce_range": True},
        "percentile 99.99": {"calibrate_method": CalibrationMethod.Percentile,
                             "extra_options": {"CalibPercentile": 99.99}},
        "percentile 99.999": best,
        "percentile 99.999, uint8 weights": {**best, "weight_type": QuantType.QUInt8},
        "percentile 99.999, Conv only": {**best, "op_types_to_quantize": ["Conv"]},
    }
    stages = [i for i, n in enumerate(nodes) if "_block0_branch2a" in n]
    if len(stages) == 4:  # open-NSFW's ResNet: keep one stage at a time in fp32
        bounds = [0, *stages, len(nodes)]
        for k in range(len(bounds) - 1):
            out[f"percentile 99.999, part {k} in fp32"] = {
                **best, "nodes_to_exclude": nodes[bounds[k]:bounds[k + 1]]}
    return out


def study(model: str, pictures: list, work: Path, all_variants: bool) -> None:
    source, prepare = MODELS[model]
    fp32 = work / f"{model}_fp32.onnx"
    graph = onnx.load(str(source))
    if graph.opset_import[0].version < 13:  # per-channel DequantizeLinear needs opset 13
        graph = version_converter.convert_version(graph, 13)
    onnx.save(graph, str(fp32))
    pre = work / f"{model}_pre.onnx"
    quant_pre_process(str(fp32), str(pre))
    tensors = [prepare(rgb).astype(np.float32)[None] for _, rgb in pictures]
    base, base_ms = run(str(fp32), tensors)
    print(f"\n## {model}: fp32 {base_ms:.2f} ms per image, {len(tensors)} images\n")
    print("| variant | ms | ratio | max diff | mean diff | decisions changed | worst image |")
    print("|---|---|---|---|---|---|---|")
    nodes = [n.name for n in onnx.load(str(pre)).graph.node]
    name = session(str(pre)).get_inputs()[0].name
    for label, extra in variants(all_variants, nodes).items():
        out = work / f"{model}_int8.onnx"
        options = dict(per_channel=True, quant_format=QuantFormat.QDQ,
                       activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        options.update(extra)
        quantize_static(str(pre), str(out), Reader(name, tensors), **options)
        rows, ms = run(str(out), tensors)
        diff = np.abs(rows - base).max(axis=1)
        changed = sum(decisions(model, a) != decisions(model, b) for a, b in zip(rows, base))
        worst = int(np.argmax(diff))
        print(f"| {label} | {ms:.2f} | {ms / base_ms:.2f} | {diff.max():.4f} | "
              f"{diff.mean():.4f} | {changed} | {pictures[worst][0]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-variants", action="store_true")
    parser.add_argument("models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    pictures = images()
    with tempfile.TemporaryDirectory() as work:
        for model in args.models:
            study(model, pictures, Path(work), args.all_variants)


if __name__ == "__main__":
    main()
