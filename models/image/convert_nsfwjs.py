#!/usr/bin/env python3
"""Convert the nsfwjs 4.3.0 "MobileNetV2Mid" tfjs graph model to ONNX.

Re-runnable. Needs: node + npm on PATH (npm registry reachable), and a Python env made from
requirements-convert.txt (tensorflow-cpu 2.15.1, tf2onnx 1.16.1, numpy 1.26.4, onnx,
onnxruntime 1.31.1).

Steps
  1. `npm pack nsfwjs@4.3.0` into build/nsfwjs/ and check the tarball's sha512 against the
     integrity pinned below AND the one the npm registry reports (`npm view ... dist.integrity`).
  2. Extract dist/models/mobilenet_v2_mid/{model.min.js, group1-shard1of2.min.js,
     group1-shard2of2.min.js}. These are browserify UMD bundles: model.min.js exports the
     model.json object, each shard exports a base64 string of the binary weight shard. They are
     evaluated with node (`require`), exactly the objects nsfwjs itself imports
     (dist/esm/model_imports/mobilenet_v2_mid.js), and written as a standard tfjs
     model directory: build/nsfwjs/tfjs_mid/{model.json, group1-shard1of2, group1-shard2of2}.
     (nsfwjs's JSONHandler maps weightsManifest path "group1-shardXofN" to the bundle
     "group1-shardXofN.min.js" and concatenates the decoded shards in manifest order.)
  3. `python -m tf2onnx.convert --tfjs model.json --opset 17` -> nsfwjs_mid.onnx
  4. onnx.checker + a sanity run with onnxruntime (rows sum to 1). The ONNX-vs-original
     check on real images is done by js/reference_nsfwjs.mjs --dump-tensors + make_reference_scores.py.
  5. Write nsfwjs_mid.onnx.sha256 and nsfwjs_mid.onnx.json (I/O description).

Converted ONNX bytes are not guaranteed identical between runs (tf2onnx), outputs are; the
sha256 file records the bytes actually produced.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

PKG = "nsfwjs"
VERSION = "4.3.0"
# sha512 integrity of nsfwjs-4.3.0.tgz as published on the npm registry.
PINNED_INTEGRITY = (
    "sha512-WTKDte0vp1X97N1h34P79G/hG+sVT3+TnDz9di1WseIJR93v11E4viNX7Vg9WsO6HYoR772Nzq2iM8jo3XBZ+g=="
)
MODEL_DIR_IN_PKG = "package/dist/models/mobilenet_v2_mid"
SHARDS = ["group1-shard1of2", "group1-shard2of2"]
OPSET = 17
INPUT_NAME = "input"  # tfjs signature name "input:0"
OUTPUT_NAME = "probabilities"  # tfjs signature name "Identity:0" (= Softmax output)

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build" / "nsfwjs"
TFJS_DIR = BUILD / "tfjs_mid"
OUT = HERE / "nsfwjs_mid.onnx"


def run(cmd: list[str], **kw) -> str:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, **kw).stdout


def sri_sha512(path: Path) -> str:
    h = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(h).decode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_package() -> Path:
    BUILD.mkdir(parents=True, exist_ok=True)
    tgz = BUILD / f"{PKG}-{VERSION}.tgz"
    if not tgz.exists():
        run(["npm", "pack", f"{PKG}@{VERSION}", "--silent"], cwd=BUILD)
    registry = run(["npm", "view", f"{PKG}@{VERSION}", "dist.integrity"]).strip()
    actual = sri_sha512(tgz)
    print(f"tarball {tgz.name}: {actual}")
    if actual != PINNED_INTEGRITY:
        sys.exit(f"integrity mismatch: got {actual}, pinned {PINNED_INTEGRITY}")
    if registry and registry != PINNED_INTEGRITY:
        sys.exit(f"registry reports {registry}, pinned {PINNED_INTEGRITY}")
    print("integrity OK (pinned and registry)")
    return tgz


def extract_model(tgz: Path) -> None:
    src = BUILD / "pkg"
    if src.exists():
        shutil.rmtree(src)
    with tarfile.open(tgz) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(MODEL_DIR_IN_PKG + "/")]
        tf.extractall(src, members=members, filter="data")
    mdir = src / MODEL_DIR_IN_PKG
    # Evaluate the UMD bundles with node (CommonJS: dist/models/package.json is type=commonjs,
    # but we only extracted the model dir, so copy them to .cjs names).
    js = r"""
const path = require('path'); const fs = require('fs');
const dir = process.argv[1]; const out = process.argv[2]; const shards = process.argv.slice(3);
const load = (f) => { const p = path.join(out, f + '.cjs'); fs.copyFileSync(path.join(dir, f + '.min.js'), p);
  const m = require(p); fs.unlinkSync(p); return m; };
const model = load('model');
fs.writeFileSync(path.join(out, 'model.json'), JSON.stringify(model));
for (const s of shards) {
  const b64 = load(s);
  if (typeof b64 !== 'string') throw new Error('shard ' + s + ' is not a base64 string');
  fs.writeFileSync(path.join(out, s), Buffer.from(b64, 'base64'));
}
"""
    if TFJS_DIR.exists():
        shutil.rmtree(TFJS_DIR)
    TFJS_DIR.mkdir(parents=True)
    run(["node", "-e", js, str(mdir), str(TFJS_DIR), *SHARDS])
    model = json.loads((TFJS_DIR / "model.json").read_text())
    paths = [p for g in model["weightsManifest"] for p in g["paths"]]
    assert paths == SHARDS, paths
    # Sanity: total weight bytes = sum over specs of prod(shape) * bytes(quantized dtype).
    nbytes = {"uint8": 1, "uint16": 2, "float16": 2, "float32": 4, "int32": 4}
    expected = 0
    for g in model["weightsManifest"]:
        for w in g["weights"]:
            n = 1
            for d in w["shape"]:
                n *= d
            dt = w.get("quantization", {}).get("dtype", w["dtype"])
            expected += n * nbytes[dt]
    actual = sum((TFJS_DIR / s).stat().st_size for s in SHARDS)
    assert expected == actual, (expected, actual)
    print(f"tfjs model: {len(model['modelTopology']['node'])} nodes, {actual} weight bytes")
    for f in ["model.json", *SHARDS]:
        print(f"  {f}: sha256 {sha256(TFJS_DIR / f)}")


def patch_for_tf2onnx() -> Path:
    """The graph was made by "TensorFlow.js Converter v1.7.4", which drops the `TArgs` attr of
    the fused ops (_FusedConv2D, FusedDepthwiseConv2dNative, _FusedMatMul). tf2onnx asks
    TensorFlow for the op signatures and fails with "NodeDef missing attr 'TArgs'" (only TF's
    _FusedConv2D/_FusedMatMul define TArgs; _FusedDepthwiseConv2dNative does not). TArgs only
    declares the dtypes of the `num_args` extra inputs (the bias: DT_FLOAT), so adding it does
    not change the computation. The original model.json is kept; the patched copy is used."""
    model = json.loads((TFJS_DIR / "model.json").read_text())
    patched = 0
    for n in model["modelTopology"]["node"]:
        attr = n.get("attr", {})
        if n["op"] == "_FusedConv2D" and "TArgs" not in attr:
            attr["TArgs"] = {"list": {"type": ["DT_FLOAT"] * int(attr["num_args"]["i"])}}
            patched += 1
    out = TFJS_DIR / "model.tf2onnx.json"
    out.write_text(json.dumps(model))
    print(f"added TArgs to {patched} fused nodes -> {out.name}")
    return out


def canonicalize_initializers(m) -> None:
    """tf2onnx's duplicate-constant merging keeps an arbitrary one of equal constants (e.g. the
    0 and 6 of the Relu6 Clips), so names/order of initializers change from run to run while the
    node sequence does not. Make the file reproducible: de-duplicate initializers by content and
    name them const_<k> in order of first use by the (deterministically ordered) nodes."""
    import hashlib as _h

    inits = {i.name: i for i in m.graph.initializer}
    by_content: dict[bytes, str] = {}
    rename: dict[str, str] = {}
    ordered = []
    for node in m.graph.node:
        for n in node.input:
            if n in inits and n not in rename:
                t = inits[n]
                anon = type(t)()
                anon.CopyFrom(t)
                anon.name = ""
                key = _h.sha256(anon.SerializeToString(deterministic=True)).digest()
                if key not in by_content:
                    new = f"const_{len(by_content)}"
                    by_content[key] = new
                    t.name = new
                    ordered.append(t)
                rename[n] = by_content[key]
    assert len(rename) == len(inits), "unused initializers"
    for node in m.graph.node:
        for i, n in enumerate(node.input):
            node.input[i] = rename.get(n, n)
    del m.graph.initializer[:]
    m.graph.initializer.extend(ordered)


def convert() -> None:
    model_json = patch_for_tf2onnx()
    tmp = OUT.with_suffix(".tmp.onnx")
    run([sys.executable, "-m", "tf2onnx.convert", "--tfjs", str(model_json),
         "--opset", str(OPSET), "--output", str(tmp)],
        # tf2onnx's constant de-duplication iterates over sets of names: fix the hash seed so
        # that the produced bytes are the same from run to run.
        env={**os.environ, "PYTHONHASHSEED": "0", "TF_CPP_MIN_LOG_LEVEL": "2"})
    # tf2onnx's --rename-inputs/--rename-outputs do not work with --tfjs (TypeError), so the
    # graph I/O is renamed here; also give the dynamic batch dimension a stable name
    # (tf2onnx makes "unk__NNN").
    import onnx

    m = onnx.load(str(tmp))
    rename = {"input:0": INPUT_NAME, "Identity:0": OUTPUT_NAME}
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        vi.name = rename.get(vi.name, vi.name)
    for node in m.graph.node:
        for i, n in enumerate(node.input):
            node.input[i] = rename.get(n, n)
        for i, n in enumerate(node.output):
            node.output[i] = rename.get(n, n)
    assert [i.name for i in m.graph.input] == [INPUT_NAME], [i.name for i in m.graph.input]
    assert [o.name for o in m.graph.output] == [OUTPUT_NAME], [o.name for o in m.graph.output]
    for vi in list(m.graph.input) + list(m.graph.output):
        d0 = vi.type.tensor_type.shape.dim[0]
        if not d0.dim_value:
            d0.dim_param = "batch"
    canonicalize_initializers(m)
    onnx.save(m, str(tmp))
    os.replace(tmp, OUT)


def describe_and_check() -> dict:
    import numpy as np
    import onnx
    import onnxruntime as ort

    m = onnx.load(str(OUT))
    onnx.checker.check_model(m)

    def dims(vi):
        return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]

    io = {
        "inputs": [{"name": i.name, "shape": dims(i),
                    "dtype": onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type)}
                   for i in m.graph.input],
        "outputs": [{"name": o.name, "shape": dims(o),
                     "dtype": onnx.TensorProto.DataType.Name(o.type.tensor_type.elem_type)}
                    for o in m.graph.output],
        "opset": [{"domain": o.domain, "version": o.version} for o in m.opset_import],
        "layout": "NHWC, RGB, float32 in [0,1] (pixel/255), 224x224",
        "classes": ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"],
        "output_is": "softmax probabilities (graph ends in Softmax)",
    }
    print(json.dumps(io, indent=1))

    # Sanity run. (The tfjs graph uses tfjs-only fused ops, e.g. FusedDepthwiseConv2dNative,
    # so TensorFlow cannot execute it directly; the ONNX-vs-original check is done on real
    # images with the original tfjs runtime: js/reference_nsfwjs.mjs --dump-tensors +
    # make_reference_scores.py.)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(OUT), so, providers=["CPUExecutionProvider"])
    x = np.zeros((2, 224, 224, 3), dtype=np.float32)
    x[1] = 1.0
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    print("zeros ->", got[0], " ones ->", got[1])
    assert got.shape == (2, 5) and np.allclose(got.sum(axis=1), 1.0, atol=1e-5)
    return io


def main() -> None:
    tgz = fetch_package()
    extract_model(tgz)
    convert()
    io = describe_and_check()
    digest = sha256(OUT)
    (HERE / "nsfwjs_mid.onnx.sha256").write_text(f"{digest}  nsfwjs_mid.onnx\n")
    io["sha256"] = digest
    io["size_bytes"] = OUT.stat().st_size
    io["source"] = {"npm": f"{PKG}@{VERSION}", "integrity": PINNED_INTEGRITY,
                    "model": "MobileNetV2Mid (dist/models/mobilenet_v2_mid)",
                    "tf2onnx": "1.16.1", "opset": OPSET}
    (HERE / "nsfwjs_mid.onnx.json").write_text(json.dumps(io, indent=1) + "\n")
    print(f"wrote {OUT.name} sha256 {digest}")


if __name__ == "__main__":
    main()
