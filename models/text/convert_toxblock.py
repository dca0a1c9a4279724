#!/usr/bin/env python3
"""Convert tox-block 0.1.2 (PyPI, MIT) to ONNX and export its Keras tokenizer to JSON.

Environment: .venv from requirements-convert.txt (see setup_venvs.sh). Run:
    .venv/bin/python convert_toxblock.py [--out-dir DIR] [--opset 17]

Writes (into --out-dir, default: this directory):
  toxblock.onnx          the Keras BiLSTM, input  "input_ids" int32 [batch, 100]
                                         output "probs"     float32 [batch, 6] (raw sigmoid,
                                         NOT rescaled; label order in toxblock_tokenizer.json)
  toxblock.onnx.sha256   sha256 of toxblock.onnx (tf2onnx output bytes may differ run to run)
  toxblock_tokenizer.json  every tokenizer / padding / rescale setting + word_index (ids < num_words)

It reads the settings from the objects tox-block itself loads (the pickled TokenSequencer and
the h5 model) and asserts they are what PIPELINE.md documents, so a changed package fails loudly.
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

HERE = os.path.dirname(os.path.abspath(__file__))

TOXBLOCK_VERSION = "0.1.2"
# sha256 of the files inside the tox-block 0.1.2 wheel
MODEL_H5_SHA256 = "587d40726f1250341a3661fac099e46582cf34cdd5136eb88a726bf6d62ec24e"
ENCODER_PKL_SHA256 = "f73db76ce4138c0a566cf91a84077ab66db1f5da40d795d2f751b5a157d91ce7"

INPUT_NAME = "input_ids"
OUTPUT_NAME = "probs"
BATCH_DIM = "batch"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_versions() -> None:
    from importlib.metadata import version

    want = {
        "tox-block": TOXBLOCK_VERSION,
        "tensorflow-cpu": "2.15.1",
        "tf2onnx": "1.16.1",
        "onnx": "1.16.2",
        "Keras-Preprocessing": "1.1.2",
    }
    for dist, v in want.items():
        have = version(dist)
        if have != v:
            sys.exit(f"{dist}=={have} installed, {v} required (use setup_venvs.sh)")
    import numpy

    if not numpy.__version__.startswith("1."):
        sys.exit(f"numpy {numpy.__version__}: need numpy<2")


def export_tokenizer(out_path: str, model_sha: str, encoder_sha: str, opset: int) -> dict:
    import joblib
    from tensorflow.keras.preprocessing import sequence
    from tox_block.config import config
    from tox_block.data_processing.preprocessors import TokenSequencer

    enc = joblib.load(config.ENCODER_PATH)
    assert isinstance(enc, TokenSequencer), type(enc)
    tok = enc.tokenizer
    assert type(tok).__module__ == "keras_preprocessing.text" and type(tok).__name__ == "Tokenizer"

    # pad_sequences is called by TokenSequencer.transform with only maxlen= set, so the
    # library defaults apply; read them from the function actually used.
    sig = inspect.signature(sequence.pad_sequences).parameters
    pad = {
        "maxlen": int(enc.max_sequence_length),
        "padding": sig["padding"].default,
        "truncating": sig["truncating"].default,
        "value": sig["value"].default,
        "dtype": sig["dtype"].default,
    }
    expected_pad = {"maxlen": 100, "padding": "pre", "truncating": "pre", "value": 0.0, "dtype": "int32"}
    assert pad == expected_pad, pad
    pad["value"] = int(pad["value"])

    settings = {
        "lower": tok.lower,
        "filters": tok.filters,
        "split": tok.split,
        "char_level": tok.char_level,
        "oov_token": tok.oov_token,
        "num_words": tok.num_words,
    }
    expected = {
        "lower": True,
        "filters": '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n',
        "split": " ",
        "char_level": False,
        "oov_token": None,
        "num_words": 20000,
    }
    assert settings == expected, settings
    assert enc.max_features == 20000

    # Only ids 1..num_words-1 can be emitted (texts_to_sequences drops i >= num_words when
    # oov_token is None). Keep them in id order.
    items = sorted(((w, i) for w, i in tok.word_index.items() if i < tok.num_words), key=lambda kv: kv[1])
    ids = [i for _, i in items]
    assert ids == list(range(1, tok.num_words)), "word ids are not exactly 1..num_words-1"

    out = {
        "format": "modgate.toxblock-tokenizer.v1",
        "source": {
            "package": f"tox-block=={TOXBLOCK_VERSION} (PyPI, MIT)",
            "model_file": "tox_block/trained_models/lstm_model_0.1.2.h5",
            "model_sha256": model_sha,
            "encoder_file": "tox_block/trained_models/encoder_0.1.2.pkl",
            "encoder_sha256": encoder_sha,
            "tokenizer_class": "keras_preprocessing.text.Tokenizer (Keras-Preprocessing 1.1.2)",
            "pad_sequences": "tensorflow.keras.preprocessing.sequence.pad_sequences (TF 2.15.1)",
        },
        "text_cleaning": "none: make_predictions() only rejects non-str and the empty string; "
        "HyperlinkUsernameIPStopwordRemover is NOT part of the prediction path",
        "tokenizer": settings,
        "lowercase_semantics": "Python 3.11 str.lower(): full Unicode 14.0 lowercase mapping "
        "(SpecialCasing: U+0130 -> 'i\\u0307', final-sigma rule for U+03A3)",
        "split_semantics": "after lowercasing, every char in `filters` becomes ' ' (U+0020); "
        "split on U+0020 only; drop empty strings. Other whitespace (\\r, U+00A0, ...) stays inside words",
        "lookup_semantics": "exact string match in word_index; words not in word_index are dropped "
        "(no OOV token). word_index below already omits ids >= num_words (those are dropped too)",
        "pad_sequences": pad,
        "pad_semantics": "keep the LAST maxlen ids (truncating='pre'); left-pad with 0 (padding='pre'). "
        "0 is never a word id. A text with no known word gives 100 zeros",
        "labels": list(config.LIST_CLASSES),
        "rescale": {
            "applied_by_default": True,
            "formula": "rescaled = abs((p - min) / (max - min)) in float32: p is the float32 model "
            "output, min is rounded to float32, (max - min) is computed in float64 then rounded "
            "to float32. Values can exceed 1.0 (p > max) and are never negative",
            "params": {k: [float(v[0]), float(v[1])] for k, v in config.RESCALE_PROBA.items()},
        },
        "onnx": {
            "file": "toxblock.onnx",
            "opset": opset,
            "input": {"name": INPUT_NAME, "dtype": "int32", "shape": [BATCH_DIM, pad["maxlen"]]},
            "output": {"name": OUTPUT_NAME, "dtype": "float32", "shape": [BATCH_DIM, 6],
                       "meaning": "raw sigmoid probabilities (rescale NOT applied), columns in `labels` order"},
        },
        "word_index": {w: i for w, i in items},
    }
    assert list(out["rescale"]["params"]) == out["labels"]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return out


def convert_model(out_path: str, opset: int, model_sha: str) -> None:
    import onnx
    import tensorflow as tf
    import tf2onnx
    from tox_block.config import config

    model = tf.keras.models.load_model(config.MODEL_PATH, compile=False)
    assert model.input_shape == (None, 100), model.input_shape
    assert model.output_shape == (None, 6), model.output_shape
    # The Keras InputLayer is float32; we expose int32 token ids instead (the graph casts
    # them, exactly like Keras does when int ids are fed: ids < 20000 are exact in float32).
    spec = [tf.TensorSpec((None, 100), tf.int32, name=INPUT_NAME)]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset)

    g = proto.graph
    assert len(g.input) == 1 and len(g.output) == 1
    old_out = g.output[0].name
    for node in g.node:
        for k, name in enumerate(node.output):
            if name == old_out:
                node.output[k] = OUTPUT_NAME
        for k, name in enumerate(node.input):
            if name == old_out:
                node.input[k] = OUTPUT_NAME
    g.output[0].name = OUTPUT_NAME
    for vi in (g.input[0], g.output[0]):
        vi.type.tensor_type.shape.dim[0].dim_param = BATCH_DIM
    assert g.input[0].name == INPUT_NAME
    assert g.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT32
    assert g.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    g.name = "toxblock_bilstm"
    proto.producer_name = "tf2onnx"
    proto.doc_string = (
        "tox-block 0.1.2 (MIT) BiLSTM converted with tf2onnx 1.16.1 from TF 2.15.1. "
        "input_ids int32 [batch,100] Keras token ids (pre-padded with 0); "
        "probs float32 [batch,6] raw sigmoid: toxic, severe_toxic, obscene, threat, insult, identity_hate."
    )
    del proto.metadata_props[:]
    for k, v in {
        "source": f"tox-block=={TOXBLOCK_VERSION}",
        "source_model_sha256": model_sha,
        "labels": ",".join(config.LIST_CLASSES),
        "tokenizer": "toxblock_tokenizer.json",
    }.items():
        p = proto.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(proto)
    onnx.save(proto, out_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=HERE)
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()
    check_versions()

    from tox_block.config import config

    model_sha = sha256_file(config.MODEL_PATH)
    encoder_sha = sha256_file(config.ENCODER_PATH)
    if model_sha != MODEL_H5_SHA256 or encoder_sha != ENCODER_PKL_SHA256:
        sys.exit(f"unexpected tox-block files: h5 {model_sha}, pkl {encoder_sha}")

    os.makedirs(args.out_dir, exist_ok=True)
    tok_path = os.path.join(args.out_dir, "toxblock_tokenizer.json")
    onnx_path = os.path.join(args.out_dir, "toxblock.onnx")
    export_tokenizer(tok_path, model_sha, encoder_sha, args.opset)
    print(f"wrote {tok_path}")
    convert_model(onnx_path, args.opset, model_sha)
    digest = sha256_file(onnx_path)
    with open(onnx_path + ".sha256", "w") as f:
        f.write(f"{digest}  toxblock.onnx\n")
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes, sha256 {digest})")


if __name__ == "__main__":
    main()
