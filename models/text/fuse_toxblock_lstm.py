#!/usr/bin/env python3
"""Rewrite toxblock.onnx's two LSTM loops as one ONNX `LSTM` operator: toxblock_lstm.onnx.

tf2onnx 1.16.1 turned the Keras BiLSTM into two `Loop` operators of 100 iterations, each
running about 60 small operators a step (the Keras cell's four gate products, hard-sigmoid
clips, tensor-list reads and writes). ONNX Runtime runs such a body operator by operator,
allocating as it goes: a run of one 100-word window cost about 8 ms of CPU, and a text at an
ordinary rate (one window per run, no batching) several milliseconds. The ONNX `LSTM` operator
computes the same cell in one kernel.

The same function, written again:
- Keras cell (tf.keras 2.15, `recurrent_activation="hard_sigmoid"`): gates z = x W + h U + b in
  the order input, forget, cell, output; i, f, o = clip(0.2 z + 0.5, 0, 1); c' = f c + i tanh(z_c);
  h' = o tanh(c').
- ONNX LSTM: gate order input, output, forget, cell; W [4H, E], R [4H, H], bias Wb + Rb;
  activations HardSigmoid (alpha 0.2, beta 0.5), Tanh, Tanh for each direction.
- The backward layer reads the sequence reversed and Keras reverses its outputs back; the
  model takes the maximum over time of [forward, backward], so the order of the steps does not
  matter after the LSTM. Padding (id 0) is run through like any word, as in the loops.

The script checks that the loop bodies are that cell (their hard-sigmoid constants, clips and
operator counts) before it writes anything, and then that both models give the same outputs
(within 1e-5) on every reference row and on random windows. Run from models/text with the
converting venv (onnx), then compare with the ONNX Runtime one (as `run_all.sh` does):
    .venv/bin/python fuse_toxblock_lstm.py
    .venv-ort/bin/python fuse_toxblock_lstm.py --compare [--time]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HIDDEN = 50
EMBED = 50
STEPS = 100
TOLERANCE = 1e-5
# The loop body's hard-sigmoid constants (tf2onnx's names): the slope of the input, forget and
# output gates, then their offsets.
HARD_SIGMOID = {"Const:0": 0.2, "Const_2:0": 0.2, "Const_4:0": 0.2,
                "Const_1:0": 0.5, "Const_3:0": 0.5, "Const_5:0": 0.5}

# tf2onnx's names of the weights in toxblock.onnx.
EMBEDDING = "model/embedding/embedding_lookup/745:0"
DENSE = ("model/dense/MatMul/ReadVariableOp:0", "model/dense/BiasAdd/ReadVariableOp:0")
DENSE_1 = ("model/dense_1/MatMul/ReadVariableOp:0", "model/dense_1/BiasAdd/ReadVariableOp:0")


def lstm_weights(inits: dict, direction: str) -> tuple:
    base = f"model/bidirectional/{direction}_lstm/lstm_cell"
    kernel = inits[f"{base}/split/ReadVariableOp/resource:0"]  # [E, 4H], gates i f c o
    recurrent = inits[f"{base}/ReadVariableOp/resource:0"]  # [H, 4H]
    bias = inits[f"{base}/split_1/ReadVariableOp/resource:0"]  # [4H]
    assert kernel.shape == (EMBED, 4 * HIDDEN) and recurrent.shape == (HIDDEN, 4 * HIDDEN)
    assert bias.shape == (4 * HIDDEN,)
    return kernel, recurrent, bias


def check_loop_body(loop) -> None:
    """The body is the Keras hard-sigmoid cell this script rewrites, nothing else."""
    from onnx import numpy_helper

    body = next(a.g for a in loop.attribute if a.name == "body")
    ops = collections.Counter(n.op_type for n in body.node)
    want = {"Add": 13, "Mul": 10, "MatMul": 8, "Slice": 4, "Min": 3, "Max": 3, "Split": 2,
            "Cast": 2, "Tanh": 2, "Gather": 1, "Less": 1, "Shape": 1, "ConstantOfShape": 1,
            "Identity": 1}
    assert ops == want, ops
    for tensor in (t for t in body.initializer if not t.dims):  # the scalars
        name, value = tensor.name, numpy_helper.to_array(tensor)
        last = name.rsplit("/", 1)[1]
        if last in HARD_SIGMOID:
            assert value == np.float32(HARD_SIGMOID[last]), (name, value)
        elif name.endswith("Minimum/y:0"):
            assert value == 1, (name, value)
        elif "/clip_by_value" in name:
            assert value == 0, (name, value)


def onnx_gates(keras: np.ndarray) -> np.ndarray:
    """Keras [in, 4H] (i f c o) to ONNX [4H, in] (i o f c)."""
    i, f, c, o = np.split(keras, 4, axis=-1)
    return np.concatenate([i, o, f, c], axis=-1).T


def fused(model, source_sha256: str):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    loops = [n for n in model.graph.node if n.op_type == "Loop"]
    assert len(loops) == 2, [n.name for n in loops]
    for loop in loops:
        check_loop_body(loop)

    w, r, b = [], [], []
    for direction in ("forward", "backward"):
        kernel, recurrent, bias = lstm_weights(inits, direction)
        w.append(onnx_gates(kernel))
        r.append(onnx_gates(recurrent))
        b.append(np.concatenate([onnx_gates(bias[None, :])[:, 0], np.zeros(4 * HIDDEN, np.float32)]))
    weights = {
        "embedding": inits[EMBEDDING],
        "lstm_W": np.stack(w).astype(np.float32),
        "lstm_R": np.stack(r).astype(np.float32),
        "lstm_B": np.stack(b).astype(np.float32),
        "dense_W": inits[DENSE[0]], "dense_B": inits[DENSE[1]],
        "dense_1_W": inits[DENSE_1[0]], "dense_1_B": inits[DENSE_1[1]],
        "flat_shape": np.array([0, 2 * HIDDEN], np.int64),
    }
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["embedding", "ids64"], ["embedded"]),  # [B, T, E]
        helper.make_node("Transpose", ["embedded"], ["time_major"], perm=[1, 0, 2]),  # [T, B, E]
        helper.make_node(
            "LSTM", ["time_major", "lstm_W", "lstm_R", "lstm_B"], ["states"],  # [T, 2, B, H]
            direction="bidirectional", hidden_size=HIDDEN,
            activations=["HardSigmoid", "Tanh", "Tanh"] * 2,
            activation_alpha=[0.2, 0.2], activation_beta=[0.5, 0.5]),
        helper.make_node("ReduceMax", ["states"], ["pooled"], axes=[0], keepdims=0),  # [2, B, H]
        helper.make_node("Transpose", ["pooled"], ["per_text"], perm=[1, 0, 2]),  # [B, 2, H]
        helper.make_node("Reshape", ["per_text", "flat_shape"], ["features"]),  # [B, 2H]: fwd, bwd
        helper.make_node("MatMul", ["features", "dense_W"], ["dense_mm"]),
        helper.make_node("Add", ["dense_mm", "dense_B"], ["dense_b"]),
        helper.make_node("Relu", ["dense_b"], ["dense"]),
        helper.make_node("MatMul", ["dense", "dense_1_W"], ["dense_1_mm"]),
        helper.make_node("Add", ["dense_1_mm", "dense_1_B"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes, "toxblock_lstm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", STEPS])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 6])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    out = helper.make_model(graph, producer_name="modgate fuse_toxblock_lstm.py",
                            opset_imports=[helper.make_opsetid("", 17)])
    out.ir_version = model.ir_version
    for prop in model.metadata_props:  # source, labels, tokenizer
        out.metadata_props.add(key=prop.key, value=prop.value)
    out.metadata_props.add(key="rewritten_from_sha256", value=source_sha256)
    onnx.checker.check_model(out)
    return out


def compare(original: str, rewritten: str) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sessions = [ort.InferenceSession(p, options, providers=["CPUExecutionProvider"])
                for p in (original, rewritten)]
    rows = [json.loads(line) for line in open(os.path.join(HERE, "reference.jsonl"), encoding="utf-8")]
    windows = [np.array(r["toxblock_tokens"], np.int32) for r in rows]
    rng = np.random.default_rng(20261129)
    for length in (1, 7, 50, 99, 100):  # random words, left-padded as the server pads
        for _ in range(20):
            window = np.zeros(STEPS, np.int32)
            window[STEPS - length:] = rng.integers(1, 20000, length)
            windows.append(window)
    ids = np.stack(windows)
    worst = 0.0
    for batch in (ids, ids[:1], ids[-3:]):
        a, b = (s.run(None, {"input_ids": batch})[0] for s in sessions)
        worst = max(worst, float(np.abs(a - b).max()))
    print(f"{len(ids)} windows ({len(rows)} reference rows): largest difference {worst:.2e}")
    assert worst <= TOLERANCE, worst
    return worst


def timing(original: str, rewritten: str, rounds: int = 3) -> None:
    """Process CPU time per run, one intra-op thread (the server's), the two files taking
    turns: medians of `rounds`."""
    import time

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    sessions = [ort.InferenceSession(p, options, providers=["CPUExecutionProvider"])
                for p in (original, rewritten)]
    rng = np.random.default_rng(1)
    for batch in (1, 3, 8, 32):
        ids = rng.integers(1, 20000, (batch, STEPS)).astype(np.int32)
        runs = max(5, 200 // batch)
        times = [[], []]
        for _ in range(rounds):
            for which, session in enumerate(sessions):
                session.run(None, {"input_ids": ids})
                start = time.process_time()
                for _ in range(runs):
                    session.run(None, {"input_ids": ids})
                times[which].append((time.process_time() - start) / runs * 1e3)
        loops, lstm = (float(np.median(t)) for t in times)
        print(f"batch {batch:2}: loops {loops:6.2f} ms, LSTM {lstm:6.3f} ms per run ({lstm / loops:.3f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, "toxblock.onnx"))
    ap.add_argument("--out", default=os.path.join(HERE, "toxblock_lstm.onnx"))
    ap.add_argument("--compare", action="store_true",
                    help="only compare --out with --model (ONNX Runtime; no onnx package)")
    ap.add_argument("--time", action="store_true", help="with --compare: CPU time per run")
    args = ap.parse_args()
    if args.compare:
        compare(args.model, args.out)
        if args.time:
            timing(args.model, args.out)
        return
    import onnx

    source = hashlib.sha256(open(args.model, "rb").read()).hexdigest()
    onnx.save(fused(onnx.load(args.model), source), args.out)
    digest = hashlib.sha256(open(args.out, "rb").read()).hexdigest()
    with open(args.out + ".sha256", "w") as f:
        f.write(f"{digest}  {os.path.basename(args.out)}\n")
    print(f"{args.out}: sha256 {digest}")


if __name__ == "__main__":
    main()
