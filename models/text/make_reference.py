#!/usr/bin/env python3
"""Build reference.jsonl with the ORIGINAL tox-block 0.1.2 and alt-profanity-check 1.9.1.

Environment: .venv (requirements-convert.txt + requirements-profanity.txt). Run:
    .venv/bin/python make_reference.py [--out reference.jsonl]

One JSON object per line (ASCII-escaped JSON, so invisible characters stay visible):
  id               "r001"...
  category         what the row is meant to pin down
  text             input text
  toxblock_tokens  the 100 int ids tox-block feeds its model (TokenSequencer.transform)
  toxblock         make_predictions(texts)            (default rescale=True)  label -> float
  toxblock_raw     make_predictions(texts, rescale=False) = raw model sigmoid  label -> float
  profanity_prob   profanity_check.predict_prob(texts)[i]
  profanity_tokens lowercased regex tokens of the TfidfVectorizer (before vocabulary lookup)

The script also checks that reimpl_toxblock.py (reading toxblock_tokenizer.json) reproduces
toxblock_tokens exactly and the rescaled scores bit for bit, and that reimpl_profanity.py's
tokenizer matches sklearn's regex tokens.
The texts contain profanity, threats and slurs on purpose: this is moderation test data.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LONG_CLEAN = (
    "The committee met on Tuesday to review the annual budget for the public library. "
    "Members discussed the cost of new books, the repair of the roof, longer opening hours "
    "during the winter months, and a proposal to hire two additional librarians for the "
    "children's section. Several residents attended the meeting and spoke in favour of the "
    "reading programme, which has grown steadily over the past three years. The treasurer "
    "presented a detailed report showing that donations increased while energy costs fell, "
    "thanks to the new insulation installed last spring. After a long and friendly debate the "
    "committee agreed to publish the full minutes on the website and to hold a second meeting "
    "next month, when the architect will present drawings for the planned reading garden and "
    "the new accessible entrance near the parking area behind the old town hall."
)

TEXTS = [
    # clean
    ("clean", "Hello, how are you doing today?"),
    ("clean", "The quick brown fox jumps over the lazy dog."),
    ("clean", "Thanks for the update, I'll review the pull request tomorrow morning."),
    ("clean", "Could you please send me the quarterly report by Friday?"),
    ("clean", "I love this recipe! My kids asked for seconds."),
    ("clean", "The meeting has been moved to room 4B at 3:30 PM."),
    ("clean", "Wikipedia is a free online encyclopedia that anyone can edit."),
    ("clean", "Please don't hesitate to contact us if you have any questions."),
    # mildly rude
    ("mild", "This is a stupid idea and you know it."),
    ("mild", "Shut up, nobody asked for your opinion."),
    ("mild", "What a dumb article, total waste of time."),
    ("mild", "You're kind of an idiot sometimes, no offense."),
    ("mild", "That movie sucked so bad."),
    ("mild", "Damn, I forgot my keys again."),
    # very profane
    ("profane", "What the fuck is wrong with you?"),
    ("profane", "This is fucking bullshit, you piece of shit."),
    ("profane", "Go fuck yourself, asshole."),
    ("profane", "You stupid motherfucking cunt."),
    ("profane", "Suck my dick, bitch."),
    # threats
    ("threat", "I will kill you, you fucking idiot!"),
    ("threat", "I'm going to find where you live and hurt your family."),
    ("threat", "Watch your back, I will beat you to death."),
    ("threat", "If you post that again I swear I will shoot you."),
    # insults / identity hate
    ("insult", "You are a pathetic loser and everybody hates you."),
    ("insult", "You're an ugly fat moron."),
    ("insult", "Only a complete retard would write something this dumb."),
    ("identity_hate", "Gay people are disgusting and should be banned."),
    ("identity_hate", "Those people are all filthy animals, send them back to their country."),
    # punctuation / emoji / whitespace
    ("punct_only", "!!!???...,,,"),
    ("punct_only", "*** --- ;;; ~~~ ^^^ ((( ))) \"\" // \\\\"),
    ("whitespace_only", "   "),
    ("emoji", "\U0001F600\U0001F600\U0001F600 great job!!! \U0001F44D"),
    ("emoji", "fuck!!!!!! \U0001F92C\U0001F92C"),
    ("punct", "@user #hashtag $money 100% (parentheses) [brackets] {braces} <tag> a_b_c"),
    ("whitespace", "hello\tworld\nnew line\r\nwindows line\rcarriage"),
    ("whitespace", "non\u00a0breaking\u00a0space talk \u00a0talk\u00a0 \u2014\u00a0preceding"),
    ("whitespace", "hello\u200e world\u200b zero\u2003width"),
    # non-ASCII
    ("accents", "Caf\u00e9 d\u00e9j\u00e0 vu \u2014 na\u00efve r\u00e9sum\u00e9, SCH\u00c4BIG N\u00c9GER Beyonc\u00e9 Pok\u00e9mon"),
    ("accents_combining", "e\u0301cole vs \u00e9cole, Jose\u0301 vs Jos\u00e9"),
    ("cyrillic", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430? \u0422\u044b \u0438\u0434\u0438\u043e\u0442."),
    ("cjk", "\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002\u4f60\u662f\u7b28\u86cb\uff01 \u8ff7\u60d1 \u9023\u7d61"),
    ("greek_final_sigma", "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u0399\u0391\u03a3 \u0395\u03a4\u0397\u03a4\u0397\u03a3"),
    ("turkish_i", "\u0130stanbul \u0130ZM\u0130R I\u0131 DIYARBAKIR"),
    ("sharp_s_kelvin", "Stra\u00dfe STRASSE \u1e9e \u212aill you \u212a"),
    ("curly_apostrophe", "don\u2019t you dare, it\u2019s mine, I\u2019m done"),
    ("fullwidth", "\uff46\uff55\uff43\uff4b \uff59\uff4f\uff55 \uff29\uff24\uff29\uff2f\uff34"),
    ("arabic_persian", "\u0627\u06cc\u0646 \u06cc\u06a9 \u062a\u0633\u062a \u0627\u0633\u062a \u06a9\u0647 \u0627\u0632 \u0645\u0646"),
    ("german_profane", "Schei\u00dfe, du Arschloch!"),
    ("titlecase_digraph", "\u01c5 \u01c4 \u01c6 titlecase \u01c8"),
    ("superscripts", "\u00b2\u00b3 \u00bd \u2460 x\u00b2 numbers \u2167 \u0663\u0664"),
    # URLs / numbers
    ("url", "Check out http://example.com/page?id=123&ref=abc for more info"),
    ("url", "Visit https://www.wikipedia.org/wiki/Main_Page or email me at john.doe@example.com"),
    ("ip", "My IP is 192.168.0.1 and the server is at 10.0.0.254:8080"),
    ("numbers", "Call me at 555-1234 or +1 (800) 555-0199, order #98765."),
    ("numbers", "In 2019, 3.14 percent of 1,000,000 users voted 42 times."),
    # long texts (> 100 tokens): pin truncating='pre'
    ("long_profane_end", LONG_CLEAN + " Anyway, fuck you all, you worthless pieces of shit."),
    ("long_profane_start", "Fuck you all, you worthless pieces of shit. " + LONG_CLEAN),
    ("long_repeat", " ".join(["spam"] * 150)),
    ("long_counting", " ".join(f"word{i} the" for i in range(80))),
    # repeated words
    ("repeat", "fuck fuck fuck fuck fuck fuck fuck fuck fuck fuck"),
    ("repeat", "no no no no no NO NO NO"),
    # mixed case
    ("case", "YOU ARE AN IDIOT"),
    ("case", "FuCk ThIs ShIt"),
    ("case", "Hello World, THIS is Mixed CASE Text"),
    # apostrophes
    ("apostrophe", "don't can't won't shouldn't I'm you're it's"),
    ("apostrophe", "'quoted' words and ''double'' apostrophes '''' end'"),
    # out of vocabulary
    ("oov", "Supercalifragilisticexpialidocious flibbertigibbet quizzaciously zxqv"),
    ("oov", "asdfghjkl qwertyuiop zxcvbnm"),
    # obfuscation
    ("obfuscated", "sh1t f*ck b!tch a$$hole"),
    ("obfuscated", "k i l l  y o u r s e l f"),
    ("short", "kys"),
    ("short", "idiot"),
    ("short", "a"),
    ("underscore_hyphen", "I_am_underscored and hyphen-ated words, user_talk and fair_use"),
    ("email", "Subject: Re: your order\n\nHi Bob,\n\nThanks for the invoice.\n-- \nAlice"),
    ("html", "<p>Hello <b>world</b></p> &amp; &nbsp; <a href=\"http://x.org\">link</a>"),
    ("newlines", "line1\nline2\n\nline3\n"),
    ("wiki", "[[User:Example|Example]] (talk) 12:34, 5 June 2010 (UTC) please stop vandalizing"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "reference.jsonl"))
    args = ap.parse_args()

    import numpy as np
    import pandas as pd
    import profanity_check
    from profanity_check import profanity_check as pc_mod
    from tox_block import prediction as tb

    from reimpl_profanity import tokenize as prof_tokenize
    from reimpl_toxblock import ToxBlockTokenizer

    labels = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
    texts = [t for _, t in TEXTS]
    assert len(set(texts)) == len(texts), "duplicate reference texts"

    tokens = tb._encoder.transform(pd.DataFrame(texts, columns=["text"]))  # what make_predictions feeds
    assert tokens.dtype == np.int32 and tokens.shape == (len(texts), 100)
    resc = tb.make_predictions(texts)  # default rescale=True
    raw = tb.make_predictions(texts, rescale=False)
    prob = profanity_check.predict_prob(texts)

    vec = pc_mod.vectorizer
    pre, tokf = vec.build_preprocessor(), vec.build_tokenizer()

    rt = ToxBlockTokenizer(os.path.join(HERE, "toxblock_tokenizer.json"))
    n_bad = 0
    rows = []
    for i, (cat, text) in enumerate(TEXTS):
        tok = [int(x) for x in tokens[i]]
        if rt.encode(text) != tok:
            print(f"TOKEN MISMATCH {i}: {text!r}\n  keras  {tok}\n  reimpl {rt.encode(text)}")
            n_bad += 1
        r = {k: float(resc[i][k]) for k in labels}
        w = {k: float(raw[i][k]) for k in labels}
        assert resc[i]["text"] == text and raw[i]["text"] == text
        again = rt.rescale([w[k] for k in labels])
        if again != [r[k] for k in labels]:
            print(f"RESCALE MISMATCH {i}: {again} vs {r}")
            n_bad += 1
        ptoks = tokf(pre(text))
        if ptoks != prof_tokenize(text):
            print(f"PROFANITY TOKEN MISMATCH {i}: {ptoks} vs {prof_tokenize(text)}")
            n_bad += 1
        rows.append({
            "id": f"r{i + 1:03d}",
            "category": cat,
            "text": text,
            "toxblock_tokens": tok,
            "toxblock": r,
            "toxblock_raw": w,
            "profanity_prob": float(prob[i]),
            "profanity_tokens": ptoks,
        })
    if n_bad:
        sys.exit(f"{n_bad} mismatches between the original packages and the reimplementations")
    with open(args.out, "w", encoding="ascii") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")
    print(f"wrote {args.out}: {len(rows)} rows; reimpl_toxblock tokens+rescale and "
          f"reimpl_profanity tokens match the originals")


if __name__ == "__main__":
    main()
