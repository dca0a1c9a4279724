#!/usr/bin/env python3
"""Convert a TensorFlow.js LAYERS model (Keras functional model saved by tfjs-converter, e.g.
nsfwjs 4.3.0's InceptionV3) to ONNX, with only numpy + onnx: no TensorFlow, no tf2onnx.

  convert_tfjs.py MODEL_DIR OUT.onnx [--meta KEY=VALUE ...]

MODEL_DIR holds model.json and the weight shards its weightsManifest names. Written for, and
covering exactly, what nsfwjs's InceptionV3 model.json uses; anything else (another layer
class, an unknown config key or value, a weight that is missing or left over, a layer called
twice, ...) is refused with a message and exit status 1:

  layer (Keras 2.2.4 config)    ONNX (opset 17), activations kept NCHW inside the graph
  InputLayer [None,H,W,C] f32   graph input "input" [batch,H,W,C] (NHWC) + Transpose -> NCHW
  Conv2D channels_last, no      Conv (kernel [kh,kw,in,out] -> [out,in,kh,kw]); padding
    dilation, groups 1            "valid" or "same" (TF rule: explicit pads, extra one at the
                                  bottom/right), optional bias; activation linear or relu
  BatchNormalization axis -1/3  BatchNormalization (inference: moving mean/variance; gamma = 1
                                  when scale=false, beta = 0 when center=false)
  Activation relu|softmax|linear Relu | Softmax | nothing
  MaxPooling2D / AveragePooling2D MaxPool / AveragePool (count_include_pad=0: the mean over the
                                  pixels inside the image, as TF and tfjs), TF padding as above
  Concatenate axis -1/3 (NHWC)  Concat axis 1 (NCHW)
  Flatten channels_last         Transpose back to NHWC (if 4-D) + Flatten axis 1
  Dropout                       nothing (inference)
  Dense, 2-D input              Gemm (kernel [in,out] as B), activation linear/relu/softmax
  model output                  graph output "probabilities" [batch, units]

Weights: the shards are concatenated in manifest order and every spec takes
prod(shape) * bytesize(stored dtype) bytes, as tfjs-core's io.decodeWeights does. Dequantized
exactly as tfjs-core 4.22 does: uint8/uint16 with min/scale -> float32(v * scale + min)
computed in float64 (JS numbers) and rounded once to float32; float16 -> float32 (exact);
unquantized float32 as is.

The output is deterministic: same model dir -> same bytes (names from the Keras layers, node
order = layer order of model.json, fixed producer fields and IR version, no timestamps).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the IR version of opset 17 (onnx 1.12); fixed so the bytes do not depend on onnx
PRODUCER = "modgate convert_tfjs.py"
PRODUCER_VERSION = "1"
INPUT_NAME = "input"
OUTPUT_NAME = "probabilities"


class Refused(Exception):
    pass


def refuse(msg: str):
    raise Refused(msg)


# ------------------------------------------------------------------------------------------
# weights
# ------------------------------------------------------------------------------------------
STORED_BYTES = {"float32": 4, "int32": 4, "uint8": 1, "uint16": 2, "float16": 2}


def read_weights(model_dir: Path, manifest: list) -> dict[str, np.ndarray]:
    chunks = []
    specs = []
    for group in manifest:
        if set(group) != {"paths", "weights"}:
            refuse(f"weightsManifest group keys {sorted(group)}")
        for p in group["paths"]:
            chunks.append((model_dir / p).read_bytes())
        specs.extend(group["weights"])
    data = b"".join(chunks)
    out: dict[str, np.ndarray] = {}
    offset = 0
    for spec in specs:
        extra = set(spec) - {"name", "shape", "dtype", "quantization"}
        if extra:
            refuse(f"weight {spec.get('name')}: unknown keys {sorted(extra)}")
        name, shape, dtype = spec["name"], [int(d) for d in spec["shape"]], spec["dtype"]
        if dtype != "float32":
            refuse(f"weight {name}: dtype {dtype} (only float32 handled)")
        if name in out:
            refuse(f"weight {name} appears twice in the manifest")
        n = math.prod(shape)
        q = spec.get("quantization")
        stored = "float32" if q is None else q.get("dtype")
        if stored not in ("float32", "uint8", "uint16", "float16"):
            refuse(f"weight {name}: quantization dtype {stored}")
        if q is not None and set(q) != ({"dtype", "min", "scale"} if stored != "float16" else {"dtype"}):
            refuse(f"weight {name}: quantization keys {sorted(q)}")
        nbytes = STORED_BYTES[stored] * n
        if offset + nbytes > len(data):
            refuse(f"weight {name}: needs bytes up to {offset + nbytes}, the shards hold {len(data)}")
        if stored == "float32":
            values = np.frombuffer(data, "<f4", n, offset).astype(np.float32)
        elif stored == "float16":
            values = np.frombuffer(data, "<f2", n, offset).astype(np.float32)
        else:
            raw = np.frombuffer(data, "u1" if stored == "uint8" else "<u2", n, offset)
            # tfjs: values[i] = v * scale + min (float64 arithmetic), stored in a Float32Array
            values = (raw.astype(np.float64) * float(q["scale"]) + float(q["min"])).astype(np.float32)
        offset += nbytes
        out[name] = values.reshape(shape)
    if offset != len(data):
        refuse(f"weight shards hold {len(data)} bytes, the manifest describes {offset}")
    return out


# ------------------------------------------------------------------------------------------
# layers
# ------------------------------------------------------------------------------------------
# Config keys that only matter for training (initializers, regularizers, constraints,
# trainable, momentum): accepted and ignored. Every other key must be interpreted below.
TRAINING_ONLY = {
    "trainable", "kernel_initializer", "bias_initializer", "kernel_regularizer",
    "bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint",
    "beta_initializer", "gamma_initializer", "moving_mean_initializer",
    "moving_variance_initializer", "beta_regularizer", "gamma_regularizer",
    "beta_constraint", "gamma_constraint", "momentum",
}
HANDLED_KEYS = {
    "InputLayer": {"name", "batch_input_shape", "dtype", "sparse"},
    "Conv2D": {"name", "filters", "kernel_size", "strides", "padding", "data_format",
               "dilation_rate", "activation", "use_bias"},
    "BatchNormalization": {"name", "axis", "epsilon", "center", "scale"},
    "Activation": {"name", "activation"},
    "MaxPooling2D": {"name", "pool_size", "strides", "padding", "data_format"},
    "AveragePooling2D": {"name", "pool_size", "strides", "padding", "data_format"},
    "Concatenate": {"name", "axis"},
    "Flatten": {"name", "data_format"},
    "Dropout": {"name", "rate", "noise_shape", "seed"},
    "Dense": {"name", "units", "activation", "use_bias"},
}


def tf_padding(size: int, k: int, s: int, padding: str) -> tuple[int, int, int]:
    """(out, pad_before, pad_after) of one spatial dim, TF/tfjs rule (conv_util.computePadInfo)."""
    if padding == "valid":
        if size < k:
            refuse(f"valid window {k} larger than input {size}")
        return (size - k) // s + 1, 0, 0
    if padding == "same":
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return out, total // 2, total - total // 2
    refuse(f"padding {padding!r}")


class Converter:
    def __init__(self, weights: dict[str, np.ndarray]):
        self.weights = weights
        self.used: set[str] = set()
        self.nodes: list = []
        self.inits: list = []
        self.init_names: set[str] = set()
        # keras tensor name -> (onnx name, layout "NCHW" | "2D", logical NHWC/2-D shape)
        self.t: dict[str, tuple[str, str, list]] = {}

    def weight(self, layer: str, param: str, shape: list | None = None) -> np.ndarray:
        key = f"{layer}/{param}"
        if key not in self.weights:
            refuse(f"weight {key} missing from the manifest")
        w = self.weights[key]
        if shape is not None and list(w.shape) != list(shape):
            refuse(f"weight {key} has shape {list(w.shape)}, expected {shape}")
        self.used.add(key)
        return w

    def init(self, name: str, arr: np.ndarray) -> str:
        assert name not in self.init_names, name
        self.init_names.add(name)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def activation(self, act: str, x: str, name: str) -> str:
        if act == "linear":
            return x
        if act == "relu":
            return self.node("Relu", [x], name, name)
        if act == "softmax":
            return self.node("Softmax", [x], name, name, axis=-1)
        refuse(f"{name}: activation {act!r}")

    def layer(self, layer: dict) -> None:
        cls, cfg, name = layer["class_name"], layer["config"], layer["name"]
        if cls not in HANDLED_KEYS:
            refuse(f"layer {name}: class {cls} not handled")
        if cfg.get("name") != name:
            refuse(f"layer {name}: config name {cfg.get('name')!r}")
        unknown = set(cfg) - HANDLED_KEYS[cls] - TRAINING_ONLY
        if unknown:
            refuse(f"layer {name} ({cls}): config keys not handled: {sorted(unknown)}")
        if "data_format" in cfg and cfg["data_format"] != "channels_last":
            refuse(f"layer {name}: data_format {cfg['data_format']}")
        if set(layer) != {"name", "class_name", "config", "inbound_nodes"}:
            refuse(f"layer {name}: keys {sorted(layer)}")

        # inputs: exactly one call of the layer, plain tensors, no kwargs
        nodes = layer["inbound_nodes"]
        if cls == "InputLayer":
            if nodes:
                refuse(f"layer {name}: InputLayer with inbound nodes")
            inputs = []
        else:
            if len(nodes) != 1:
                refuse(f"layer {name}: called {len(nodes)} times (shared layers not handled)")
            inputs = []
            for ref in nodes[0]:
                if len(ref) != 4 or ref[1] != 0 or ref[2] != 0 or ref[3] != {}:
                    refuse(f"layer {name}: inbound {ref} not handled")
                if ref[0] not in self.t:
                    refuse(f"layer {name}: input {ref[0]} not defined yet (layers not in order)")
                inputs.append(self.t[ref[0]])
            if cls != "Concatenate" and len(inputs) != 1:
                refuse(f"layer {name}: {len(inputs)} inputs")

        if cls == "InputLayer":
            shape = cfg["batch_input_shape"]
            if cfg["dtype"] != "float32" or cfg["sparse"] or len(shape) != 4 or shape[0] is not None \
                    or not all(isinstance(d, int) and d > 0 for d in shape[1:]):
                refuse(f"input {name}: {cfg}")
            if self.t:
                refuse("more than one InputLayer")
            self.graph_input = helper.make_tensor_value_info(
                INPUT_NAME, TensorProto.FLOAT, ["batch", *shape[1:]])
            out = self.node("Transpose", [INPUT_NAME], f"{name}/nchw", f"{name}/nchw", perm=[0, 3, 1, 2])
            self.t[name] = (out, "NCHW", list(shape))
            return

        x, layout, shape = inputs[0]

        if cls == "Conv2D":
            if layout != "NCHW":
                refuse(f"{name}: input is not 4-D")
            _, h, w, c = shape
            kh, kw = cfg["kernel_size"]
            sh, sw = cfg["strides"]
            if list(cfg["dilation_rate"]) != [1, 1]:
                refuse(f"{name}: dilation_rate {cfg['dilation_rate']}")
            f = int(cfg["filters"])
            oh, pt, pb = tf_padding(h, kh, sh, cfg["padding"])
            ow, pl, pr = tf_padding(w, kw, sw, cfg["padding"])
            k = self.weight(name, "kernel", [kh, kw, c, f])
            ins = [x, self.init(f"{name}/kernel", k.transpose(3, 2, 0, 1))]
            if cfg["use_bias"]:
                ins.append(self.init(f"{name}/bias", self.weight(name, "bias", [f])))
            conv = f"{name}/conv" if cfg["activation"] != "linear" else name
            y = self.node("Conv", ins, conv, conv, kernel_shape=[kh, kw], strides=[sh, sw],
                          pads=[pt, pl, pb, pr], dilations=[1, 1], group=1)
            y = self.activation(cfg["activation"], y, name)
            self.t[name] = (y, "NCHW", [None, oh, ow, f])

        elif cls == "BatchNormalization":
            if layout != "NCHW" or cfg["axis"] not in (3, -1):
                refuse(f"{name}: axis {cfg['axis']} on {layout}")
            c = shape[3]
            eps = float(cfg["epsilon"])
            gamma = self.weight(name, "gamma", [c]) if cfg["scale"] else np.ones([c], np.float32)
            beta = self.weight(name, "beta", [c]) if cfg["center"] else np.zeros([c], np.float32)
            mean = self.weight(name, "moving_mean", [c])
            var = self.weight(name, "moving_variance", [c])
            ins = [x, self.init(f"{name}/gamma" if cfg["scale"] else f"{name}/gamma(ones)", gamma),
                   self.init(f"{name}/beta" if cfg["center"] else f"{name}/beta(zeros)", beta),
                   self.init(f"{name}/moving_mean", mean), self.init(f"{name}/moving_variance", var)]
            y = self.node("BatchNormalization", ins, name, name, epsilon=eps)
            self.t[name] = (y, "NCHW", shape)

        elif cls == "Activation":
            y = self.activation(cfg["activation"], x, name)
            if cfg["activation"] == "softmax" and layout != "2D":
                refuse(f"{name}: softmax on a {layout} tensor")
            self.t[name] = (y, layout, shape)

        elif cls in ("MaxPooling2D", "AveragePooling2D"):
            if layout != "NCHW":
                refuse(f"{name}: input is not 4-D")
            _, h, w, c = shape
            kh, kw = cfg["pool_size"]
            sh, sw = cfg["strides"] if cfg["strides"] is not None else cfg["pool_size"]
            oh, pt, pb = tf_padding(h, kh, sh, cfg["padding"])
            ow, pl, pr = tf_padding(w, kw, sw, cfg["padding"])
            common = dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=[pt, pl, pb, pr])
            if cls == "MaxPooling2D":
                y = self.node("MaxPool", [x], name, name, **common)
            else:
                y = self.node("AveragePool", [x], name, name, count_include_pad=0, **common)
            self.t[name] = (y, "NCHW", [None, oh, ow, c])

        elif cls == "Concatenate":
            if len(inputs) < 2:
                refuse(f"{name}: {len(inputs)} inputs")
            if any(i[1] != "NCHW" for i in inputs) or cfg["axis"] not in (3, -1):
                refuse(f"{name}: axis {cfg['axis']}")
            if any(i[2][:3] != shape[:3] for i in inputs):
                refuse(f"{name}: spatial shapes differ {[i[2] for i in inputs]}")
            y = self.node("Concat", [i[0] for i in inputs], name, name, axis=1)
            self.t[name] = (y, "NCHW", [*shape[:3], sum(i[2][3] for i in inputs)])

        elif cls == "Flatten":
            if layout == "NCHW":  # Keras flattens in NHWC order
                x = self.node("Transpose", [x], f"{name}/nhwc", f"{name}/nhwc", perm=[0, 2, 3, 1])
            y = self.node("Flatten", [x], name, name, axis=1)
            self.t[name] = (y, "2D", [None, math.prod(shape[1:])])

        elif cls == "Dropout":  # identity at inference
            self.t[name] = (x, layout, shape)

        elif cls == "Dense":
            if layout != "2D":
                refuse(f"{name}: input of rank {len(shape)}")
            units, n_in = int(cfg["units"]), shape[1]
            ins = [x, self.init(f"{name}/kernel", self.weight(name, "kernel", [n_in, units]))]
            if cfg["use_bias"]:
                ins.append(self.init(f"{name}/bias", self.weight(name, "bias", [units])))
            mm = f"{name}/gemm" if cfg["activation"] != "linear" else name
            y = self.node("Gemm", ins, mm, mm)
            y = self.activation(cfg["activation"], y, name)
            self.t[name] = (y, "2D", [None, units])


def convert(model_dir: Path, meta: dict[str, str]) -> onnx.ModelProto:
    model = json.loads((model_dir / "model.json").read_text())
    if set(model) - {"modelTopology", "weightsManifest", "format", "generatedBy", "convertedBy"}:
        refuse(f"model.json keys {sorted(model)}")
    if model.get("format", "layers-model") != "layers-model":
        refuse(f"format {model.get('format')} (only tfjs layers models handled)")
    topo = model["modelTopology"]
    mc = topo.get("model_config", topo)
    if mc.get("class_name") not in ("Model", "Functional"):
        refuse(f"model class {mc.get('class_name')} (only functional Keras models handled)")
    cfg = mc["config"]
    if set(cfg) != {"name", "layers", "input_layers", "output_layers"}:
        refuse(f"model config keys {sorted(cfg)}")
    if len(cfg["input_layers"]) != 1 or len(cfg["output_layers"]) != 1:
        refuse(f"inputs {cfg['input_layers']} outputs {cfg['output_layers']}")

    conv = Converter(read_weights(model_dir, model["weightsManifest"]))
    names = [layer["name"] for layer in cfg["layers"]]
    if len(set(names)) != len(names):
        refuse("duplicate layer names")
    for layer in cfg["layers"]:
        conv.layer(layer)
    left = sorted(set(conv.weights) - conv.used)
    if left:
        refuse(f"weights not used by any layer: {left}")

    in_name, in_node, in_tensor = cfg["input_layers"][0]
    out_name, out_node, out_tensor = cfg["output_layers"][0]
    if (in_node, in_tensor, out_node, out_tensor) != (0, 0, 0, 0) or names[0] != in_name:
        refuse(f"input/output layers {cfg['input_layers']} {cfg['output_layers']}")
    y, layout, shape = conv.t[out_name]
    if layout != "2D":
        refuse(f"output {out_name} is {layout}")
    # Name the graph output: rename the producer's output tensor.
    renamed = 0
    for n in conv.nodes:
        for i, o in enumerate(n.output):
            if o == y:
                n.output[i] = OUTPUT_NAME
                renamed += 1
        for i, o in enumerate(n.input):
            if o == y:
                refuse(f"output {y} is also consumed inside the graph")
    if renamed != 1:
        refuse(f"output {y} is not produced by exactly one node")
    out_vi = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", shape[1]])

    graph = helper.make_graph(conv.nodes, cfg["name"], [conv.graph_input], [out_vi],
                              initializer=conv.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name=PRODUCER, producer_version=PRODUCER_VERSION)
    m.ir_version = IR_VERSION
    for k in sorted(meta):
        m.metadata_props.add(key=k, value=meta[k])
    onnx.checker.check_model(m, full_check=True)
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                    help="metadata_props entry of the ONNX model (repeatable)")
    a = ap.parse_args()
    meta = {}
    for kv in a.meta:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            ap.error(f"--meta {kv!r}: expected KEY=VALUE")
        meta[k] = v
    try:
        m = convert(a.model_dir, meta)
    except Refused as e:
        print(f"convert_tfjs: refused: {e}", file=sys.stderr)
        return 1
    data = m.SerializeToString(deterministic=True)
    partial = a.out.with_name(a.out.name + ".partial")
    partial.write_bytes(data)
    partial.replace(a.out)
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"convert_tfjs: {a.out} ({len(data)} bytes, {len(m.graph.node)} nodes: {', '.join(ops)}; "
          f"{len(m.graph.initializer)} initializers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
