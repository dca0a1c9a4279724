#!/usr/bin/env python3
"""How often Perspective's route would refuse an English comment as another language, and how
often it catches a comment in another language, by the letters a text has.

Perspective detects the language of a comment sent without `languages` and refuses one its
attributes do not read (400 "Attribute TOXICITY does not support request languages: xx").
modgate's models read English only, so its route refuses a text the language detector
(`src/text/langid.rs`) reliably finds to be another language, once the text has at least
`LANGUAGE_REFUSAL_LETTERS_MIN` letters (`src/api/dialect/perspective.rs`): on short texts the
detector's "reliable" findings are often wrong ("lol" reads as Spanish).

Texts: Debian's fortune cookies (packages `fortunes`, `fortunes-de`, `fortunes-es`,
`fortunes-it`, `fortunes-br`, `fortunes-pl`, `fortunes-cs`, `fortunes-ru`), each cookie whole
(up to 600 characters) and each of its lines alone (short texts, as many comments are).

    cargo build --release --example langid_lines
    python3 models/text/perspective_language_study.py [--binary target/release/examples/langid_lines]

Writes the table to standard output (kept in `LANGUAGE_STATS.md`).
"""

import argparse
import collections
import os
import subprocess
import sys

ROOT = "/usr/share/games/fortunes"
# Directory (or file set) per language; English is the top-level files.
OTHER = {"de": "de", "es": "es", "it": "it", "pt": "brasil", "pl": "pl", "cs": "cs", "ru": "ru"}
# Top-level English files that are not prose.
SKIP = {"art", "ascii-art", "linuxcookie", "perl", "computers", "zippy", "translate-me", "brasil"}
THRESHOLDS = [0, 20, 40, 60]
CONFIDENCES = [0.9, 0.99, 0.999]
# What src/api/dialect/perspective.rs refuses from.
CHOSEN = (40, 0.99)
COOKIE_CHARS_MAX = 600


def cookies(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        # "overstriking": a character, a backspace and another
        text = "".join(c for c in f.read() if c >= " " or c == "\n")
    for cookie in text.split("\n%\n"):
        cookie = cookie.strip("%\n ")
        if cookie and "\ufffd" not in cookie:
            yield cookie


def files(language):
    if language == "en":
        for name in sorted(os.listdir(ROOT)):
            path = os.path.join(ROOT, name)
            # fortunes-it links its files here too
            regular = os.path.isfile(path) and not os.path.islink(path)
            if regular and "." not in name and name not in SKIP:
                yield path
        return
    base = os.path.join(ROOT, OTHER[language])
    if os.path.isfile(base):
        yield base
        return
    for top, _, names in os.walk(base):
        for name in sorted(names):
            if not name.endswith((".dat", ".u8")):
                yield os.path.join(top, name)


def texts(language):
    """(kind, text): each cookie whole, and each of its lines with letters."""
    for path in files(language):
        for cookie in cookies(path):
            whole = " ".join(cookie.split())
            if len(whole) <= COOKIE_CHARS_MAX:
                yield "cookie", whole
            for line in cookie.splitlines():
                line = line.strip()
                if sum(c.isalpha() for c in line) >= 2:
                    yield "line", line


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/examples/langid_lines")
    args = parser.parse_args()
    rows = []
    for language in ["en", *OTHER]:
        for kind, text in texts(language):
            if "\t" in text:
                continue
            rows.append((language, kind, text))
    if not rows:
        sys.exit("no fortune files: apt-get install fortunes fortunes-de fortunes-es ...")
    out = subprocess.run(
        [args.binary],
        input="\n".join(text for _, _, text in rows) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(rows), (len(out), len(rows))
    # (letters in the detector's sample, its first 120 characters; confidence; refused at 0.9)
    seen = []
    for (language, kind, text), line in zip(rows, out):
        code, confidence, reliable, _ = line.split("\t", 3)
        letters = sum(c.isalpha() for c in text[:120])
        other = reliable == "true" and code != "en"
        seen.append((language, kind, letters, float(confidence), other, code, text))
    print("Share of all texts of each set that would be refused (a reliable finding of another")
    print("language, at least the letters and the confidence of the column):")
    print()
    columns = [(t, c) for t in THRESHOLDS for c in CONFIDENCES]
    print("| texts | count | " + " | ".join(f"{t} letters, {c}" for t, c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for group in [("en", "line"), ("en", "cookie"), ("other", "line"), ("other", "cookie")]:
        members = [r for r in seen if ("en" if r[0] == "en" else "other", r[1]) == group]
        cells = []
        for threshold, confidence in columns:
            refused = sum(
                1 for r in members if r[4] and r[2] >= threshold and r[3] >= confidence
            )
            cells.append(f"{100 * refused / max(len(members), 1):.2f} %")
        name = f"{'English' if group[0] == 'en' else 'other languages'}, {group[1]}s"
        print(f"| {name} | {len(members)} | " + " | ".join(cells) + " |")
    print()
    print(f"English texts refused at {CHOSEN[0]} letters and {CHOSEN[1]} (up to 20):")
    shown = 0
    for language, _, letters, confidence, other, code, text in seen:
        if language == "en" and other and letters >= CHOSEN[0] and confidence >= CHOSEN[1]:
            print(f"- {code} {confidence:.4f}: {text[:100]}")
            shown += 1
            if shown == 20:
                break


if __name__ == "__main__":
    main()
