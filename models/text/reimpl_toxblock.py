#!/usr/bin/env python3
"""Reference reimplementation of tox-block 0.1.2's text -> token pipeline (stdlib + numpy only).

Reads toxblock_tokenizer.json (written by convert_toxblock.py) and reproduces, token for
token, what `tox_block.prediction.make_predictions` feeds to the Keras model:

    keras_preprocessing.text.Tokenizer.texts_to_sequences  (lower, filters, split, word_index,
                                                            num_words cut, no OOV token)
    tensorflow.keras.preprocessing.sequence.pad_sequences  (maxlen 100, 'pre', 'pre', 0, int32)

and the optional min-max "rescale" that make_predictions applies by default.
This is the spec the Rust implementation must follow; see PIPELINE.md.

Usage as a script:  python reimpl_toxblock.py "some text" ...   (prints the 100 token ids)
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_JSON = os.path.join(HERE, "toxblock_tokenizer.json")


class ToxBlockTokenizer:
    def __init__(self, path: str = DEFAULT_JSON):
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        tok = cfg["tokenizer"]
        pad = cfg["pad_sequences"]
        assert tok["char_level"] is False and tok["oov_token"] is None
        assert tok["split"] == " "
        self.lower: bool = tok["lower"]
        self.filters: str = tok["filters"]
        self.split: str = tok["split"]
        self.num_words: int = tok["num_words"]
        self.word_index: Dict[str, int] = cfg["word_index"]
        self.maxlen: int = pad["maxlen"]
        self.padding: str = pad["padding"]
        self.truncating: str = pad["truncating"]
        self.value: int = pad["value"]
        self.labels: List[str] = cfg["labels"]
        self.rescale_params = cfg["rescale"]["params"]
        self._table = str.maketrans({c: self.split for c in self.filters})

    def words(self, text: str) -> List[str]:
        """keras_preprocessing.text.text_to_word_sequence"""
        if self.lower:
            text = text.lower()
        text = text.translate(self._table)
        return [w for w in text.split(self.split) if w]

    def ids(self, text: str) -> List[int]:
        """Tokenizer.texts_to_sequences for one text (unpadded)."""
        out = []
        for w in self.words(text):
            i = self.word_index.get(w)
            # word_index in the JSON only holds ids < num_words; unknown words are dropped
            if i is not None and i < self.num_words:
                out.append(i)
        return out

    def encode(self, text: str) -> List[int]:
        """ids + pad_sequences -> exactly maxlen int ids."""
        seq = self.ids(text)
        n = self.maxlen
        if len(seq) > n:
            seq = seq[-n:] if self.truncating == "pre" else seq[:n]
        padn = n - len(seq)
        if self.padding == "pre":
            return [self.value] * padn + seq
        return seq + [self.value] * padn

    def rescale(self, raw: Sequence[float]) -> List[float]:
        """make_predictions(rescale=True): |(p - min) / (max - min)| in float32
        (p is float32; min and (max - min) are Python floats rounded to float32)."""
        out = []
        for label, p in zip(self.labels, raw):
            lo, hi = self.rescale_params[label]
            p32 = np.float32(p)
            v = np.abs((p32 - np.float32(lo)) / np.float32(hi - lo))
            out.append(float(np.float32(v)))
        return out


if __name__ == "__main__":
    t = ToxBlockTokenizer()
    for arg in sys.argv[1:]:
        print(json.dumps({"text": arg, "words": t.words(arg), "tokens": t.encode(arg)}, ensure_ascii=False))
