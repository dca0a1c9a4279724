#!/usr/bin/env python3
"""Writes reference.jsonl: texts with the token ids that tokenizer.json gives (prefix "query: ",
truncation to max_tokens) and the per-category probabilities computed here with onnxruntime
(one thread) and heads.json, so the Rust side can test parity (to 1e-4).

Texts: the ones written below (by us, for this file) and a fixed sample of validation-split rows
from sources with permissive licences (MIT, CC0, CC BY, Apache-2.0), each line naming its source.

  python3 make_reference.py --data DATA --enc ENC_DIR --heads heads.json --out reference.jsonl
Each line: {"text", "source", "input_ids", "probs": {category: p}, "embedding": [...] (first 40 lines)}
"""
import argparse
import json
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed import encode, head_probs, load_tokenizer, run, session  # noqa: E402

OWN = [
    "", " ", "hello", "Hello, world!", "HELLO   WORLD", "Thanks for the quick reply, see you on Monday.",
    "Can you send me the invoice for October?", "The meeting has been moved to 3pm in room 204.",
    "I love this recipe, my kids ate everything.", "What time does the pharmacy open on Sundays?",
    "The build failed again because of a missing semicolon in main.rs", "Happy birthday!!! 🎉🎂🥳",
    "I will find where you live and I will hurt you.", "You are a worthless idiot and everyone hates you.",
    "Shut up, you stupid moron.", "All immigrants are vermin and should be thrown out of the country.",
    "Women are too dumb to vote.", "I'm going to kill you tomorrow after school.",
    "I can't do this anymore, I just want to end my life.", "I've been cutting myself again and I don't want to stop.",
    "Nobody would miss me if I was gone. Tonight I'm going to take all the pills.",
    "What the fuck is wrong with this fucking printer", "This shit is so good lol",
    "WINNER!! You have been selected for a £1000 prize. Call 09061701461 now to claim.",
    "URGENT: your account is suspended, click http://example.com/verify to restore access",
    "Free entry in a weekly competition to win FA Cup final tickets. Text FA to 87121",
    "Send me nudes or I'll post your pictures everywhere.", "She has a nice body, I'd like to see her naked.",
    "Bombs will go off at the station tomorrow, you have been warned.",
    "We should burn their houses down and kill every last one of them.",
    # de
    "Vielen Dank für Ihre Nachricht, wir melden uns morgen.", "Du bist so ein dummer Idiot.",
    "Alle Flüchtlinge sind Verbrecher und gehören abgeschoben.", "Ich bringe dich um, wenn ich dich sehe.",
    "Scheiße, der Zug ist schon wieder zu spät.", "Ich will nicht mehr leben.",
    # fr
    "Merci beaucoup, c'était une très belle soirée.", "Ferme ta gueule, connard.",
    "Les étrangers sont des parasites.", "Je vais te tuer, sale type.", "Je n'ai plus envie de vivre.",
    # es
    "¿Dónde está la estación de tren más cercana?", "Eres un imbécil y un inútil.",
    "Te voy a matar, hijo de puta.", "Los inmigrantes son una plaga.", "Ya no quiero seguir viviendo.",
    # it
    "Buongiorno, vorrei prenotare un tavolo per due.", "Sei un idiota, stai zitto.",
    "Ti ammazzo se ti rivedo.", "Gli immigrati sono tutti criminali.",
    # pt
    "Obrigado pela ajuda, foi muito útil.", "Você é um idiota, cala a boca.", "Vou te matar, seu desgraçado.",
    "Esses nordestinos são todos vagabundos.", "Não aguento mais, quero morrer.",
    # nl
    "Bedankt voor je bericht, ik bel je morgen terug.", "Je bent een vuile klootzak.", "Ik maak je af.",
    "Alle buitenlanders moeten het land uit.",
    # pl
    "Dziękuję za pomoc, miłego dnia.", "Jesteś głupim idiotą.", "Zabiję cię, jak cię spotkam.",
    "Wszyscy imigranci to złodzieje.", "Kurwa, znowu pada deszcz.",
    # ar
    "شكرا جزيلا على مساعدتك", "أنت غبي وحقير", "سأقتلك إذا رأيتك مرة أخرى", "كل اللاجئين مجرمون ويجب طردهم",
    "صباح الخير، كيف حالك اليوم؟",
    # hi
    "आपकी मदद के लिए धन्यवाद", "तुम बहुत बेवकूफ हो", "मैं तुम्हें मार डालूँगा", "मैं अब और जीना नहीं चाहता",
    "kal office mein meeting hai, time pe aana",
    # zh
    "谢谢你的帮助，祝你有美好的一天。", "你这个傻逼，滚开。", "我要杀了你。", "外地人都是垃圾，滚出我们城市。",
    "今天天气很好，我们去公园散步吧。", "我不想活了。",
    # mixed / edge cases
    "ok 👍", "lol", "?!?!", "1234567890", "https://example.com/a/b?c=d", "user@example.com",
    "I said \"no\"\ttwice,\nthen left.", "naïve café résumé coöperate", "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ",
    " ".join(["This is a long, harmless sentence about gardening and tomatoes."] * 30),
    " ".join(["You are a pathetic loser."] * 40),
    "kill the process with SIGTERM, then restart the daemon", "That movie was a killer, absolutely loved it.",
    "My grandmother passed away last week and I miss her.", "The shooting range opens at 9am for members.",
]

PERMISSIVE = ["davidson", "mlma", "edos", "convabuse", "germeval2018", "cold", "banpl", "spamassassin"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--enc", required=True)
    ap.add_argument("--heads", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-val", type=int, default=100)
    a = ap.parse_args()
    heads = json.load(open(a.heads))
    items = [(t, "own") for t in OWN]
    rows = [json.loads(l) for l in open(os.path.join(a.data, "table.jsonl"))]
    val = [r for r in rows if r["split"] == "val" and r["source"] in PERMISSIVE]
    rng = random.Random(20261207)
    rng.shuffle(val)
    by = {}
    for r in val:  # round-robin over sources
        by.setdefault(r["source"], []).append(r)
    k = 0
    while len(items) < len(OWN) + a.n_val and any(by.values()):
        s = PERMISSIVE[k % len(PERMISSIVE)]
        if by.get(s):
            r = by[s].pop()
            items.append((r["text"], f"{r['source']} val {r['id']}"))
        k += 1
    tok = load_tokenizer(os.path.join(a.enc, "tokenizer.json"), heads["encoder"]["max_tokens"])
    sess = session(os.path.join(a.enc, heads["encoder"]["file"]))
    with open(a.out, "w") as f:
        for i, (t, src) in enumerate(items):
            ids = encode(tok, [t])[0]
            e = run(sess, [ids])[0].astype(np.float64)
            probs = {h["name"]: float(head_probs(h, e[None, :])[0]) for h in heads["categories"]}
            d = {"text": t, "source": src, "input_ids": ids, "probs": probs}
            if i < 40:
                d["embedding"] = [float(x) for x in e.astype(np.float32)]
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(f"{len(items)} lines -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
