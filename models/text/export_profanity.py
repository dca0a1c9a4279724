#!/usr/bin/env python3
"""Export alt-profanity-check 1.9.1 (PyPI, MIT) to a self-contained JSON file.

Environment: requirements-profanity.txt (scikit-learn MUST be 1.9.1: the package's joblib
pickles were written by it). Run:
    .venv/bin/python export_profanity.py [--out profanity_svm.json]

The package's predict_prob(texts) is
    model.predict_proba(vectorizer.transform(texts))[:, 1]
with vectorizer = TfidfVectorizer and model = CalibratedClassifierCV(LinearSVC, method="sigmoid").
This script asserts the exact structure it knows how to describe (word analyzer, unigrams,
l2 norm, binary sigmoid calibration, ...) and fails loudly otherwise. reimpl_profanity.py reads
the JSON back and reproduces predict_prob with numpy only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from importlib import resources

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_VERSION = "1.9.1"
SKLEARN_VERSION = "1.9.1"
# sha256 of the pickles inside the alt-profanity-check 1.9.1 wheel
VECTORIZER_SHA256 = "19c5200dc6a41f026e0558e2f164f5fe8d8f58e502b46b37e4385037fcfa4831"
MODEL_SHA256 = "aeafc04849d4d93db4721cf30a86ebf22085595294b8a07d51918e7fa98f538b"


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "profanity_svm.json"))
    args = ap.parse_args()

    from importlib.metadata import version

    for dist, want in {"alt-profanity-check": PACKAGE_VERSION, "scikit-learn": SKLEARN_VERSION,
                       "joblib": "1.6.0"}.items():
        if version(dist) != want:
            sys.exit(f"{dist}=={version(dist)} installed, {want} required")

    data = resources.files("profanity_check") / "data"
    vec_sha = sha256_bytes((data / "vectorizer.joblib").read_bytes())
    mod_sha = sha256_bytes((data / "model.joblib").read_bytes())
    if (vec_sha, mod_sha) != (VECTORIZER_SHA256, MODEL_SHA256):
        sys.exit(f"unexpected joblib files: vectorizer {vec_sha}, model {mod_sha}")

    import numpy as np
    from profanity_check import profanity_check as pc  # the objects predict_prob uses
    from sklearn.calibration import CalibratedClassifierCV, _SigmoidCalibration
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
    from sklearn.svm import LinearSVC

    vec, model = pc.vectorizer, pc.model

    # ---------------- vectorizer ----------------
    assert type(vec) is TfidfVectorizer, type(vec)
    p = vec.get_params()
    assert p["analyzer"] == "word" and p["ngram_range"] == (1, 1)
    assert p["lowercase"] is True and p["strip_accents"] is None
    assert p["preprocessor"] is None and p["tokenizer"] is None
    assert p["token_pattern"] == r"(?u)\b\w\w+\b"
    assert p["input"] == "content" and p["binary"] is False
    assert p["norm"] == "l2" and p["use_idf"] is True and p["smooth_idf"] is True
    assert p["sublinear_tf"] is False and p["dtype"] is np.float64
    assert p["stop_words"] == "english" and p["vocabulary"] is None
    vocab = vec.vocabulary_
    n_features = len(vocab)
    assert sorted(vocab.values()) == list(range(n_features))
    idf = vec.idf_
    assert idf.shape == (n_features,) and idf.dtype == np.float64
    stop = sorted(ENGLISH_STOP_WORDS)
    assert not (set(vocab) & ENGLISH_STOP_WORDS), "vocabulary contains stop words"
    assert all(t == t.lower() for t in vocab)

    # ---------------- classifier ----------------
    assert type(model) is CalibratedClassifierCV, type(model)
    assert model.method == "sigmoid"
    assert list(model.classes_) == [0, 1]
    folds = []
    for cc in model.calibrated_classifiers_:
        est = cc.estimator
        assert type(est) is LinearSVC, type(est)
        assert cc.method == "sigmoid" and list(cc.classes) == [0, 1] and list(est.classes_) == [0, 1]
        assert len(cc.calibrators) == 1 and type(cc.calibrators[0]) is _SigmoidCalibration
        assert est.coef_.shape == (1, n_features) and est.intercept_.shape == (1,)
        cal = cc.calibrators[0]
        folds.append({
            "svm_coef": [float(x) for x in est.coef_[0]],
            "svm_intercept": float(est.intercept_[0]),
            "sigmoid_a": float(cal.a_),
            "sigmoid_b": float(cal.b_),
        })

    items = sorted(vocab.items(), key=lambda kv: kv[1])
    out = {
        "format": "modgate.profanity-svm.v1",
        "source": {
            "package": f"alt-profanity-check=={PACKAGE_VERSION} (PyPI, MIT)",
            "scikit_learn": SKLEARN_VERSION,
            "vectorizer_file": "profanity_check/data/vectorizer.joblib",
            "vectorizer_sha256": vec_sha,
            "model_file": "profanity_check/data/model.joblib",
            "model_sha256": mod_sha,
            "entry_point": "profanity_check.predict_prob(texts) = model.predict_proba(vectorizer.transform(texts))[:, 1]",
        },
        "vectorizer": {
            "class": "sklearn.feature_extraction.text.TfidfVectorizer",
            "params": {
                "input": p["input"], "encoding": p["encoding"], "decode_error": p["decode_error"],
                "strip_accents": p["strip_accents"], "lowercase": p["lowercase"],
                "preprocessor": None, "tokenizer": None, "analyzer": p["analyzer"],
                "token_pattern": p["token_pattern"], "stop_words": p["stop_words"],
                "ngram_range": list(p["ngram_range"]), "max_df": p["max_df"], "min_df": p["min_df"],
                "max_features": p["max_features"], "binary": p["binary"], "dtype": "float64",
                "norm": p["norm"], "use_idf": p["use_idf"], "smooth_idf": p["smooth_idf"],
                "sublinear_tf": p["sublinear_tf"],
            },
            "n_features": n_features,
            "stop_words_note": "stop words are removed after tokenizing, but no stop word is in the "
            "vocabulary, so for transform() they change nothing: a Rust port can ignore them",
            "stop_words": stop,
            "vocabulary": {t: i for t, i in items},
            "idf": [float(x) for x in idf],
        },
        "classifier": {
            "class": "sklearn.calibration.CalibratedClassifierCV",
            "method": "sigmoid",
            "ensemble": model.ensemble,
            "cv": model.cv,
            "classes": [0, 1],
            "base_estimator": {"class": "sklearn.svm.LinearSVC",
                               "params": {k: v for k, v in est.get_params().items() if k != "random_state"}},
            "n_folds": len(folds),
            "predict_proba": "for each fold k: d_k = dot(x, svm_coef_k) + svm_intercept_k; "
            "p_k = 1 / (1 + exp(sigmoid_a_k * d_k + sigmoid_b_k)) (= expit(-(a*d+b))); "
            "profanity_prob = (p_1 + ... + p_n) / n_folds (float64). "
            "x is the l2-normalised tf*idf row vector",
            "folds": folds,
        },
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {n_features} features, {len(folds)} calibrated folds, "
          f"{os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
