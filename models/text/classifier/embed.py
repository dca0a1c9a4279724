#!/usr/bin/env python3
"""Embeds every text of table.jsonl with the ONNX encoder (one CPU thread) into OUT.npy.

Tokenization (the contract the Rust side must follow, see README.md):
  text -> "query: " + text -> tokenizer.json (XLM-R SentencePiece Unigram; adds <s>=0 ... </s>=2)
  -> at most MAX_TOKENS ids (HF truncation: the content is cut, </s> kept as the last id)
  -> input_ids / attention_mask int64, right-padded with <pad>=1 / 0.
The graph's "embedding" output is mean-pooled over the mask and L2-normalized.

  python3 embed.py --table DATA/table.jsonl --model ENC/e5-small-q4.onnx --tokenizer ENC/tokenizer.json \
      --out DATA/emb_q4 [--splits val,ham_holdout] [--reuse DATA/emb_q4_old]
Work is saved in chunks (OUT.parts/), so an interrupted run resumes. --reuse PREV takes the embedding
of every row whose id is in PREV.ids.json from PREV.npy (same encoder and tokenizer) and embeds only
the other rows, e.g. after fetch_data.py added a source.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

PREFIX = "query: "
MAX_TOKENS = 128
PAD_ID = 1


def load_tokenizer(path, max_tokens=MAX_TOKENS):
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.enable_truncation(max_length=max_tokens)
    return tok


def session(model, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def encode(tok, texts):
    return [e.ids for e in tok.encode_batch([PREFIX + t for t in texts])]


def run(sess, id_lists):
    L = max(len(x) for x in id_lists)
    ids = np.full((len(id_lists), L), PAD_ID, np.int64)
    am = np.zeros((len(id_lists), L), np.int64)
    for i, x in enumerate(id_lists):
        ids[i, : len(x)] = x
        am[i, : len(x)] = 1
    return sess.run(["embedding"], {"input_ids": ids, "attention_mask": am})[0]


def embed_texts(sess, tok, texts, batch=32, chunk_dir=None, chunk=2048, log=True):
    ids = encode(tok, texts)
    order = np.argsort([len(x) for x in ids], kind="stable")
    out = np.zeros((len(texts), 384), np.float32)
    t0 = time.time()
    for c0 in range(0, len(order), chunk):
        sel = order[c0: c0 + chunk]
        part = os.path.join(chunk_dir, f"{c0:07d}.npy") if chunk_dir else None
        if part and os.path.exists(part):
            out[sel] = np.load(part)
            continue
        res = np.zeros((len(sel), 384), np.float32)
        for b0 in range(0, len(sel), batch):
            res[b0: b0 + batch] = run(sess, [ids[i] for i in sel[b0: b0 + batch]])
        out[sel] = res
        if part:
            np.save(part, res)
        if log:
            done = min(c0 + chunk, len(order))
            print(f"{done}/{len(order)} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return out


def head_probs(head, E):
    """Probabilities of one heads.json category for embeddings E [n, dim] (float64 maths)."""
    E = np.asarray(E, np.float64)
    if "hidden" in head:
        h = np.maximum(E @ np.asarray(head["hidden"]["weights"], np.float64).T + np.asarray(head["hidden"]["bias"]), 0)
    else:
        h = E
    z = h @ np.asarray(head["weights"], np.float64) + head["bias"]
    return 1.0 / (1.0 + np.exp(-z))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--splits", default=None, help="comma-separated splits to embed (default all)")
    ap.add_argument("--reuse", default=None, help="PREV: reuse PREV.npy / PREV.ids.json for the ids they hold")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.table)]
    if a.splits:
        keep = set(a.splits.split(","))
        rows = [r for r in rows if r["split"] in keep]
    os.makedirs(a.out + ".parts", exist_ok=True)
    tok = load_tokenizer(a.tokenizer)
    sess = session(a.model)
    t0 = time.time()
    E = np.zeros((len(rows), 384), np.float32)
    todo = list(range(len(rows)))
    if a.reuse:
        prev = {i: k for k, i in enumerate(json.load(open(a.reuse + ".ids.json")))}
        P = np.load(a.reuse + ".npy", mmap_mode="r")
        have = [j for j, r in enumerate(rows) if r["id"] in prev]
        E[have] = P[[prev[rows[j]["id"]] for j in have]]
        todo = [j for j, r in enumerate(rows) if r["id"] not in prev]
        print(f"{len(have)} embeddings reused from {a.reuse}.npy, {len(todo)} to embed", file=sys.stderr)
    if todo:
        E[todo] = embed_texts(sess, tok, [rows[j]["text"] for j in todo], chunk_dir=a.out + ".parts")
    np.save(a.out + ".npy", E)
    with open(a.out + ".ids.json", "w") as f:
        json.dump([r["id"] for r in rows], f)
    print(f"{len(rows)} texts in {time.time() - t0:.0f}s -> {a.out}.npy", file=sys.stderr)


if __name__ == "__main__":
    main()
