#!/usr/bin/env python3
"""Synthetic OCR test set: English text over real photographs and plain backgrounds.

Writes build/ocr_set/NNN.png (240 images, at most 800 px a side) and build/ocr_set/truth.json:

    {"000.png": {"width": w, "height": h, "background": "photo:safe/...|solid|gradient",
                 "lines": [{"text": "...", "category": "sentence|profanity|email|phone|url",
                            "font": "LiberationSans-Bold.ttf", "size": 32, "angle": -3.5,
                            "color": [r, g, b], "stroke": 0, "quad": [[x, y] x 4]}, ...]}, ...}

`quad` is the text's ink box (Pillow's font.getbbox) after the rotation: top-left, top-right,
bottom-right, bottom-left as the text reads. Lines never overlap (their rotated boxes plus a
margin are disjoint). Deterministic: one seeded RNG, fixed font and photo lists, Pillow 12.1.1
(with its bundled FreeType) and numpy 1.26.4 from the venv.

Fonts: three Debian packages, fetched with `apt-get download` and unpacked with `dpkg-deb -x`
into build/debs/ (not installed), as fetch_safe_photos.sh does:
    fonts-dejavu-core 2.37-6    (DejaVu Sans / Serif / Mono, Bitstream Vera licence)
    fonts-liberation2 2.1.5-1   (Liberation Sans / Serif / Mono 2, SIL OFL 1.1)
    fonts-freefont-ttf 20120503-10 (GNU FreeSans / FreeSerif / FreeMono, GPL-3+ with font exception)
Photos: safe/ (run fetch_safe_photos.sh first); images that already hold text are left out.

    .venv/bin/python make_ocr_set.py        # needs `apt-get update` once for the fonts
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
DEBS = os.path.join(BUILD, "debs")
OUT = os.path.join(BUILD, "ocr_set")
SEED = 20261126
COUNT = 240
MAX_SIDE = 800

FONT_DEBS = {  # package=version: sha256 of the .deb
    "fonts-dejavu-core=2.37-6": "8892669e51aab4dc56682c8e39d8ddb7d70fad83c369344e1e240bf3ca22bb76",
    "fonts-liberation2=2.1.5-1": "35ffaa54f117e633e89a5da89af235a073b34dbe582726fbf6989568f7fd9bda",
    "fonts-freefont-ttf=20120503-10": "4ca1c21ebc479198a3a5879d236c8317d6f7b2f1c403f7890e24c02eead05615",
}
FONTS = [  # (package, path under usr/share/fonts/truetype/)
    ("fonts-dejavu-core", "dejavu/DejaVuSans.ttf"),
    ("fonts-dejavu-core", "dejavu/DejaVuSans-Bold.ttf"),
    ("fonts-dejavu-core", "dejavu/DejaVuSerif.ttf"),
    ("fonts-dejavu-core", "dejavu/DejaVuSansMono.ttf"),
    ("fonts-liberation2", "liberation2/LiberationSans-Regular.ttf"),
    ("fonts-liberation2", "liberation2/LiberationSans-Bold.ttf"),
    ("fonts-liberation2", "liberation2/LiberationSerif-Regular.ttf"),
    ("fonts-liberation2", "liberation2/LiberationSerif-Italic.ttf"),
    ("fonts-liberation2", "liberation2/LiberationMono-Regular.ttf"),
    ("fonts-freefont-ttf", "freefont/FreeSans.ttf"),
    ("fonts-freefont-ttf", "freefont/FreeSansBold.ttf"),
    ("fonts-freefont-ttf", "freefont/FreeSerif.ttf"),
    ("fonts-freefont-ttf", "freefont/FreeSerifBoldItalic.ttf"),
    ("fonts-freefont-ttf", "freefont/FreeMono.ttf"),
]
# safe/ images that hold text or logos (they would be unlabelled text in the truth).
PHOTO_EXCLUDE = ("text.png", "page.png", "logo.png", "no_time_for_that_tiny.gif", "mate_desktop_")

SENTENCES = [
    "Fresh bread every morning", "Meet me at the station at noon", "Open seven days a week",
    "The quick brown fox jumps over the lazy dog", "Happy birthday Sarah", "Free parking for customers",
    "Limited time offer", "Please keep off the grass", "Best coffee in town", "We are hiring",
    "Summer sale up to 50% off", "Room 204 is on the second floor", "Thank you for visiting",
    "Do not feed the animals", "Lost cat answers to Milo", "Garden party on Saturday",
    "Exit only", "Mind the gap", "Welcome to the jungle", "Bring your own bag",
    "Tickets sold at the door", "Warning: wet floor", "Closed for renovation", "Call us today",
    "New menu, same great taste", "Order now and save", "Team meeting at 3 pm",
    "Life is short, eat dessert first", "Keep calm and carry on", "No smoking in this area",
    "Vintage records and books", "Hand made with love", "Sunday market 8am to 2pm",
    "Recycle your bottles here", "Love you to the moon and back", "Delivery within 24 hours",
]
PROFANITY = [
    "What the fuck is this", "This is bullshit", "Shut up you stupid bitch", "Damn it all",
    "Piece of shit car", "Get lost asshole", "Holy shit", "Fuck off", "You bastard",
    "Go to hell", "Dumbass of the year", "Motherfucker", "Screw you", "Crap service",
    "What a dick", "Son of a bitch", "Total shitshow", "Kiss my ass",
]
FIRST = ["john", "mary", "alex", "sam", "lisa", "tom", "anna", "mike", "kate", "david", "emma", "paul"]
LAST = ["smith", "jones", "brown", "taylor", "wilson", "evans", "walker", "white", "green", "hall"]
DOMAINS = ["example.com", "mail.com", "shop-online.net", "company.org", "inbox.co.uk", "webmail.io"]
HOSTS = ["example.com", "freeprizes.win", "my-shop.net", "bestdeals.org", "news24.info", "cheap-pills.biz"]
PATHS = ["", "/offer", "/claim-now", "/login", "/p/8842", "/sale?id=42", "/signup"]
SHORT = ["bit.ly/3xYz9Qa", "t.co/aB12cD", "tinyurl.com/y7k2m9", "goo.gl/Rk8pQ"]


def fetch_fonts():
    """Font files (unpacked .debs in build/debs/x-<package>/), downloaded when missing."""
    os.makedirs(DEBS, exist_ok=True)
    for spec, sha in FONT_DEBS.items():
        name, version = spec.split("=")
        debs = glob.glob(os.path.join(DEBS, f"{name}_{version.replace(':', '%3a')}_*.deb"))
        if not debs:
            subprocess.run(["apt-get", "download", spec], cwd=DEBS, check=True)
            debs = glob.glob(os.path.join(DEBS, f"{name}_{version.replace(':', '%3a')}_*.deb"))
        deb = debs[0]
        got = subprocess.run(["sha256sum", deb], capture_output=True, text=True, check=True).stdout.split()[0]
        if got != sha:
            sys.exit(f"make_ocr_set: {deb} has sha256 {got}, expected {sha}")
        target = os.path.join(DEBS, "x-" + name)
        if not os.path.isdir(target):
            subprocess.run(["dpkg-deb", "-x", deb, target], check=True)
    paths = [os.path.join(DEBS, "x-" + pkg, "usr/share/fonts/truetype", rel) for pkg, rel in FONTS]
    for p in paths:
        if not os.path.exists(p):
            sys.exit(f"make_ocr_set: missing font {p}")
    return paths


def photo_files():
    files = []
    for folder in ("skimage", "gnome-backgrounds", "mate-backgrounds"):
        for f in sorted(glob.glob(os.path.join(HERE, "safe", folder, "*"))):
            base = os.path.basename(f)
            if base.lower().endswith((".png", ".jpg", ".jpeg", ".webp", ".gif")) and not base.startswith(PHOTO_EXCLUDE):
                files.append(f)
    if not files:
        sys.exit("make_ocr_set: no photos in safe/: run fetch_safe_photos.sh first")
    return files


class Photos:
    """Each photo decoded once, reduced to at most 1200 px a side (Pillow, LANCZOS)."""

    def __init__(self, files):
        self.files = files
        self.cache = {}

    def get(self, path):
        if path not in self.cache:
            with Image.open(path) as im:
                im.seek(0)
                im = im.convert("RGB")
                scale = 1200 / max(im.size)
                if scale < 1:
                    im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.LANCZOS)
                self.cache[path] = im
        return self.cache[path]


def text_of(rng, category):
    r = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    if category == "sentence":
        t = r(SENTENCES)
    elif category == "profanity":
        t = r(PROFANITY)
    elif category == "email":
        sep = r([".", "_", ""])
        user = r(FIRST) + sep + r(LAST) if rng.random() < 0.7 else r(FIRST) + str(int(rng.integers(1, 99)))
        t = user + "@" + r(DOMAINS)
        if rng.random() < 0.3:
            t = r(["Email: ", "Contact ", "Write to "]) + t
    elif category == "phone":
        d = lambda n: "".join(str(int(x)) for x in rng.integers(0, 10, n))  # noqa: E731
        fmt = int(rng.integers(6))
        t = [f"+1 ({d(3)}) {d(3)}-{d(4)}", f"{d(3)}-{d(3)}-{d(4)}", f"+44 20 {d(4)} {d(4)}",
             f"07{d(3)} {d(6)}", f"({d(3)}) {d(3)} {d(4)}", f"+49 30 {d(7)}"][fmt]
        if rng.random() < 0.4:
            t = r(["Call ", "Tel: ", "Phone ", "Text me "]) + t
    else:  # url
        kind = int(rng.integers(4))
        if kind == 0:
            t = "www." + r(HOSTS) + r(PATHS)
        elif kind == 1:
            t = r(["http://", "https://"]) + r(HOSTS) + r(PATHS)
        elif kind == 2:
            t = r(SHORT)
        else:
            t = r(HOSTS) + r(PATHS)
        if rng.random() < 0.3:
            t = r(["Visit ", "More at ", "Go to "]) + t
    style = rng.random()
    if category in ("sentence", "profanity") and style < 0.25:
        t = t.upper()
    return t


def luminance(rgb):
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def contrasting(rng, background_lum):
    """A text colour at least ~110 luminance levels away from the background."""
    for _ in range(100):
        c = tuple(int(v) for v in rng.integers(0, 256, 3))
        if abs(luminance(c) - background_lum) >= 110:
            return c
    return (0, 0, 0) if background_lum > 127 else (255, 255, 255)


def background(rng, photos, w, h):
    kind = rng.random()
    if kind < 0.6:
        path = photos.files[int(rng.integers(len(photos.files)))]
        im = photos.get(path)
        # a random crop with the target's aspect ratio, 40-100 % of the largest that fits
        fit = min(im.width / w, im.height / h)
        f = fit * (0.4 + 0.6 * rng.random())
        cw, ch = max(1, int(w * f)), max(1, int(h * f))
        x0 = int(rng.integers(0, im.width - cw + 1))
        y0 = int(rng.integers(0, im.height - ch + 1))
        crop = im.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.BICUBIC)
        return crop, "photo:" + os.path.relpath(path, HERE)
    c1 = tuple(int(v) for v in rng.integers(0, 256, 3))
    if kind < 0.85:
        return Image.new("RGB", (w, h), c1), "solid"
    c2 = tuple(int(v) for v in rng.integers(0, 256, 3))
    t = np.linspace(0, 1, w if rng.random() < 0.5 else h)
    ramp = (np.array(c1)[None, :] * (1 - t[:, None]) + np.array(c2)[None, :] * t[:, None]).astype(np.uint8)
    arr = np.broadcast_to(ramp[None, :, :], (h, w, 3)) if len(t) == w else np.broadcast_to(ramp[:, None, :], (h, w, 3))
    return Image.fromarray(np.ascontiguousarray(arr)), "gradient"


def render_line(text, font, color, stroke, stroke_color, angle):
    """The line on a transparent layer, rotated; and its ink quad in layer coordinates."""
    l, t, r, b = font.getbbox(text, stroke_width=stroke)
    pad = 4 + stroke
    layer = Image.new("RGBA", (r - l + 2 * pad, b - t + 2 * pad), (0, 0, 0, 0))
    ImageDraw.Draw(layer).text((pad - l, pad - t), text, font=font, fill=color + (255,),
                               stroke_width=stroke, stroke_fill=stroke_color + (255,))
    quad = np.array([[pad, pad], [pad + r - l, pad], [pad + r - l, pad + b - t], [pad, pad + b - t]], float)
    if angle:
        cx, cy = layer.width / 2, layer.height / 2
        rotated = layer.rotate(angle, resample=Image.BICUBIC, expand=True)
        # Pillow rotates counter-clockwise by `angle` degrees (image y axis pointing down)
        a = math.radians(angle)
        ca, sa = math.cos(a), math.sin(a)
        nx, ny = rotated.width / 2, rotated.height / 2
        q = quad - [cx, cy]
        quad = np.stack([q[:, 0] * ca + q[:, 1] * sa + nx, -q[:, 0] * sa + q[:, 1] * ca + ny], axis=1)
        layer = rotated
    return layer, quad


def make_image(rng, index, fonts, photos):
    w = int(rng.integers(320, MAX_SIDE + 1))
    h = int(rng.integers(240, MAX_SIDE + 1))
    img, bg_kind = background(rng, photos, w, h)
    lines = []
    occupied = []  # axis-aligned boxes (x0, y0, x1, y1) with a margin
    n_lines = int(rng.choice([1, 2, 2, 3, 3, 4]))
    categories = ["sentence", "profanity", "email", "phone", "url"]
    for _ in range(n_lines):
        for _attempt in range(30):
            category = categories[int(rng.integers(len(categories)))]
            text = text_of(rng, category)
            font_path = fonts[int(rng.integers(len(fonts)))]
            size = int(rng.integers(16, 57))
            font = ImageFont.truetype(font_path, size)
            u = rng.random()
            angle = 0.0 if u < 0.6 else float(np.round(rng.uniform(-5, 5) if u < 0.85 else rng.choice([-1, 1]) * rng.uniform(5, 12), 1))
            # provisional colours; fixed once the place is known
            layer, quad = render_line(text, font, (0, 0, 0), 0, (0, 0, 0), angle)
            if layer.width > w - 8 or layer.height > h - 8:
                continue
            x = int(rng.integers(4, w - layer.width - 4 + 1))
            y = int(rng.integers(4, h - layer.height - 4 + 1))
            box = (x, y, x + layer.width, y + layer.height)
            m = 6
            if any(not (box[2] + m <= o[0] or o[2] + m <= box[0] or box[3] + m <= o[1] or o[3] + m <= box[1]) for o in occupied):
                continue
            region = np.asarray(img.crop(box), dtype=np.float64)
            lum = float(np.mean(region @ np.array([0.299, 0.587, 0.114])))
            color = contrasting(rng, lum)
            stroke = 0
            stroke_color = (0, 0, 0)
            if bg_kind.startswith("photo") and rng.random() < 0.5:
                stroke = int(rng.integers(1, 4))
                stroke_color = (0, 0, 0) if luminance(color) > 127 else (255, 255, 255)
            layer, quad = render_line(text, font, color, stroke, stroke_color, angle)
            x = min(x, w - layer.width)
            y = min(y, h - layer.height)
            img.paste(layer, (x, y), layer)
            occupied.append((x, y, x + layer.width, y + layer.height))
            lines.append({
                "text": text, "category": category, "font": os.path.basename(font_path), "size": size,
                "angle": angle, "color": list(color), "stroke": stroke,
                "quad": [[round(float(px + x), 1), round(float(py + y), 1)] for px, py in quad],
            })
            break
    return img, {"width": w, "height": h, "background": bg_kind, "lines": lines}


def main():
    fonts = fetch_fonts()
    photos = Photos(photo_files())
    rng = np.random.default_rng(SEED)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    truth = {}
    for i in range(COUNT):
        img, info = make_image(rng, i, fonts, photos)
        name = f"{i:03d}.png"
        img.save(os.path.join(OUT, name), optimize=False, compress_level=6)
        truth[name] = info
    with open(os.path.join(OUT, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, ensure_ascii=False)
        f.write("\n")
    n_lines = sum(len(v["lines"]) for v in truth.values())
    cats = {}
    for v in truth.values():
        for line in v["lines"]:
            cats[line["category"]] = cats.get(line["category"], 0) + 1
    size = sum(os.path.getsize(os.path.join(OUT, n)) for n in truth)
    print(f"{len(truth)} images, {n_lines} lines {cats}, {size / 1e6:.1f} MB in {os.path.relpath(OUT, HERE)}")


if __name__ == "__main__":
    main()
