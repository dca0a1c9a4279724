#!/usr/bin/env python3
"""Make the committed test-image set testimages/ from scikit-image's bundled photos.

Deterministic for a fixed Pillow (12.1.1: libjpeg-turbo 3.1.3, libwebp 1.6.0, zlib) and
scikit-image (0.25.2) -- see requirements.txt. Safe images only (no nudity).

Every source photo is public domain / CC0 (see testimages/LICENSES.md, written here too).
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image
import skimage
import skimage.data as skd

HERE = Path(__file__).resolve().parent
OUT = HERE / "testimages"
DATA = Path(skimage.data.__file__).parent

SOURCES = {
    "astronaut": ("astronaut.png", "Eileen Collins, NASA Great Images database (flic.kr/p/r9qvLn)",
                  "Public domain (NASA; 'No known copyright restrictions, released into the public domain')"),
    "chelsea": ("chelsea.png", "Chelsea the cat, photo by Stefan van der Walt",
                "CC0 ('No copyright restrictions. CC0 by the photographer')"),
    "coffee": ("coffee.png", "Coffee cup, photo by Rachel Michetti, courtesy of Pikolo Espresso Bar",
               "CC0 ('No copyright restrictions. CC0 by the photographer')"),
    "rocket": ("rocket.jpg", "Launch of DSCOVR on Falcon 9, SpaceX (flickr spacexphotos/16511594820)",
               "Public domain (released into the public domain by SpaceX)"),
    "camera": ("camera.png", "Gray-level 'camera' image, photo by Lav Varshney",
               "CC0 ('No copyright restrictions. CC0 by the photographer')"),
    "microaneurysms": ("microaneurysms.png", "Detail of retina image 07_dr.JPG (green channel) from the "
                       "High-Resolution Fundus (HRF) Image Database, Andreas Maier",
                       "CC0 ('No copyright restrictions. CC0 given by owner')"),
    "retina": ("retina.jpg", "Fundus photograph of normal left eye, Mikael Haggstrom (Wikimedia Commons)",
               "CC0 1.0 Universal Public Domain Dedication"),
    "hubble": ("hubble_deep_field.jpg", "Hubble eXtreme Deep Field, NASA (hubblesite.org, release 2012-37)",
               "Public domain (NASA)"),
}


def src(name: str) -> Image.Image:
    f = DATA / SOURCES[name][0]
    im = Image.open(f)
    im.load()
    return im


def rgb(name: str) -> Image.Image:
    return src(name).convert("RGB")


def fit(im: Image.Image, w: int, h: int) -> Image.Image:
    """Centre-crop to aspect w:h, then resize with LANCZOS."""
    W, H = im.size
    if W * h > H * w:  # too wide
        nw = H * w // h
        x0 = (W - nw) // 2
        im = im.crop((x0, 0, x0 + nw, H))
    else:
        nh = W * h // w
        y0 = (H - nh) // 2
        im = im.crop((0, y0, W, y0 + nh))
    return im.resize((w, h), Image.Resampling.LANCZOS)


def save(im: Image.Image, name: str, **kw) -> None:
    im.save(OUT / name, **kw)


def main() -> None:
    if OUT.exists():
        for p in OUT.iterdir():
            if p.name != "LICENSES.md":
                p.unlink()
    OUT.mkdir(exist_ok=True)
    used: dict[str, list[str]] = {}  # source -> files
    file_sources: dict[str, list[str]] = {}  # file -> sources

    def use(file: str, *names: str) -> None:
        file_sources[file] = [SOURCES[n][0] for n in names]
        for n in names:
            used.setdefault(n, []).append(file)

    # --- JPEG ---------------------------------------------------------------------------
    save(rgb("chelsea"), "jpeg_baseline_chelsea_451x300.jpg", quality=90)
    use("jpeg_baseline_chelsea_451x300.jpg", "chelsea")
    save(fit(rgb("astronaut"), 512, 384), "jpeg_baseline_astronaut_512x384.jpg", quality=85)
    use("jpeg_baseline_astronaut_512x384.jpg", "astronaut")
    save(rgb("coffee"), "jpeg_progressive_coffee_600x400.jpg", quality=85, progressive=True)
    use("jpeg_progressive_coffee_600x400.jpg", "coffee")
    save(fit(rgb("chelsea"), 64, 48), "jpeg_baseline_chelsea_64x48.jpg", quality=90)
    use("jpeg_baseline_chelsea_64x48.jpg", "chelsea")
    save(fit(rgb("retina"), 1152, 864), "jpeg_baseline_retina_1152x864_1mp.jpg", quality=80)
    use("jpeg_baseline_retina_1152x864_1mp.jpg", "retina")
    save(rgb("rocket"), "jpeg_444_rocket_640x427.jpg", quality=92, subsampling=0)
    use("jpeg_444_rocket_640x427.jpg", "rocket")
    save(src("camera").convert("L"), "jpeg_gray_camera_512x512.jpg", quality=90)
    use("jpeg_gray_camera_512x512.jpg", "camera")
    # Exactly 256x256 (open-NSFW's resize is then a no-op) and 224x224 (nsfwjs skips resizing).
    save(fit(rgb("coffee"), 256, 256), "jpeg_baseline_coffee_256x256.jpg", quality=90)
    use("jpeg_baseline_coffee_256x256.jpg", "coffee")
    # EXIF Orientation = 6 (rotate 90 CW to display). Neither reference pipeline applies it.
    exif = Image.Exif()
    exif[0x0112] = 6
    save(fit(rgb("rocket"), 320, 240), "jpeg_exif_orientation6_rocket_320x240.jpg", quality=90,
         exif=exif.tobytes())
    use("jpeg_exif_orientation6_rocket_320x240.jpg", "rocket")

    # --- PNG ----------------------------------------------------------------------------
    save(fit(rgb("hubble"), 320, 240), "png_rgb_hubble_320x240.png", optimize=True)
    use("png_rgb_hubble_320x240.png", "hubble")
    save(fit(rgb("astronaut"), 224, 224), "png_rgb_astronaut_224x224.png", optimize=True)
    use("png_rgb_astronaut_224x224.png", "astronaut")
    # RGBA with real transparency: left third fully transparent (alpha 0) but with the photo's
    # RGB kept underneath, then a horizontal alpha ramp 0..255, right part opaque. Pipelines
    # that drop alpha see the full photo; pipelines that composite would not.
    ch = fit(rgb("chelsea"), 300, 200)
    a = np.zeros((200, 300), np.uint8)
    ramp = np.linspace(0, 255, 100).round().astype(np.uint8)
    a[:, 100:200] = ramp[None, :]
    a[:, 200:] = 255
    rgba = ch.copy()
    rgba.putalpha(Image.fromarray(a, "L"))
    save(rgba, "png_rgba_chelsea_300x200.png", optimize=True)
    use("png_rgba_chelsea_300x200.png", "chelsea")
    save(fit(src("camera").convert("L"), 256, 192), "png_gray_camera_256x192.png", optimize=True)
    use("png_gray_camera_256x192.png", "camera")
    # Palette (P) with 64 colours and one transparent index (tRNS).
    pal = fit(rgb("coffee"), 300, 200).quantize(colors=64, method=Image.Quantize.MEDIANCUT,
                                                 dither=Image.Dither.NONE)
    save(pal, "png_palette_coffee_300x200.png", optimize=False, transparency=0)
    use("png_palette_coffee_300x200.png", "coffee")
    # Tiny image (upscaling path).
    save(fit(rgb("coffee"), 16, 12), "png_rgb_coffee_16x12.png")
    use("png_rgb_coffee_16x12.png", "coffee")

    # Gray + alpha (LA): left half alpha 0 over the photo's gray values.
    la = fit(src("camera").convert("L"), 160, 120)
    al = np.full((120, 160), 255, np.uint8)
    al[:, :80] = 0
    la = Image.merge("LA", (la, Image.fromarray(al, "L")))
    save(la, "png_gray_alpha_camera_160x120.png", optimize=True)
    use("png_gray_alpha_camera_160x120.png", "camera")

    # Unmodified copy of skimage's microaneurysms.png (102x102 gray retina detail): a safe
    # image on which nsfwjs gives porn ~0.6, i.e. exercises a non-tiny class probability.
    shutil.copyfile(DATA / "microaneurysms.png", OUT / "png_gray_microaneurysms_102x102.png")
    use("png_gray_microaneurysms_102x102.png", "microaneurysms")
    # Synthetic uniform skin-like colour (no source image): open-NSFW ~0.3, nsfwjs hentai ~0.08.
    Image.new("RGB", (320, 240), (198, 134, 110)).save(OUT / "png_synthetic_solid_320x240.png")

    # --- WebP ---------------------------------------------------------------------------
    # Lossless RGBA (exact=True keeps the RGB under alpha 0 instead of letting the encoder
    # rewrite invisible pixels).
    wa = fit(rgb("chelsea"), 150, 100)
    wal = np.zeros((100, 150), np.uint8)
    wal[:, 50:100] = np.linspace(0, 255, 50).round().astype(np.uint8)[None, :]
    wal[:, 100:] = 255
    wa.putalpha(Image.fromarray(wal, "L"))
    save(wa, "webp_lossless_rgba_chelsea_150x100.webp", lossless=True, quality=100, method=4,
         exact=True)
    use("webp_lossless_rgba_chelsea_150x100.webp", "chelsea")
    save(rgb("rocket"), "webp_lossy_rocket_640x427.webp", quality=80, method=4)
    use("webp_lossy_rocket_640x427.webp", "rocket")
    save(fit(rgb("chelsea"), 240, 160), "webp_lossless_chelsea_240x160.webp", lossless=True,
         quality=100, method=4)
    use("webp_lossless_chelsea_240x160.webp", "chelsea")
    f0 = fit(rgb("coffee"), 320, 240)
    f1 = fit(rgb("hubble"), 320, 240)
    f0.save(OUT / "webp_animated_2frames_coffee_320x240.webp", save_all=True, append_images=[f1],
            duration=[500, 500], loop=0, lossless=False, quality=80, method=4,
            allow_mixed=False, minimize_size=False)
    use("webp_animated_2frames_coffee_320x240.webp", "coffee", "hubble")

    # --- GIF ----------------------------------------------------------------------------
    g0 = fit(rgb("chelsea"), 200, 150).quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
    g1 = fit(rgb("rocket"), 200, 150).quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                               dither=Image.Dither.NONE)
    g0.save(OUT / "gif_animated_2frames_chelsea_200x150.gif", save_all=True, append_images=[g1],
            duration=[500, 500], loop=0, optimize=False, disposal=1)
    use("gif_animated_2frames_chelsea_200x150.gif", "chelsea", "rocket")

    # Single-frame GIF with a transparent palette index covering the left quarter. nsfwjs's
    # reference (omggif blit into a zeroed canvas) sees black there; Pillow (open-NSFW) sees
    # the palette colour stored at the transparent index.
    gt = fit(rgb("coffee"), 120, 90).quantize(colors=255, method=Image.Quantize.MEDIANCUT,
                                             dither=Image.Dither.NONE)
    ga = np.asarray(gt).copy()
    ga[:, :30] = 255  # index 255 = transparent (palette entry set to a visible orange)
    gimg = Image.fromarray(ga, "P")
    palette = gt.getpalette()[: 255 * 3] + [255, 128, 0]
    gimg.putpalette(palette)
    gimg.save(OUT / "gif_transparent_coffee_120x90.gif", transparency=255, optimize=False)
    use("gif_transparent_coffee_120x90.gif", "coffee")

    # --- checks & manifest --------------------------------------------------------------
    manifest = {}
    total = 0
    for p in sorted(OUT.iterdir()):
        if p.name in ("LICENSES.md", "manifest.json"):
            continue
        im = Image.open(p)
        info = {"format": im.format, "mode": im.mode, "size": list(im.size),
                "frames": getattr(im, "n_frames", 1), "bytes": p.stat().st_size,
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                "progressive": bool(im.info.get("progressive", 0)) if im.format == "JPEG" else None,
                "sources": file_sources.get(p.name, ["synthetic (no source image)"])}
        manifest[p.name] = info
        total += p.stat().st_size
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    write_licenses(used)
    for k, v in manifest.items():
        print(f"{k:48s} {v['format']:5s} {v['mode']:5s} {v['size'][0]:5d}x{v['size'][1]:<5d} "
              f"frames={v['frames']} {v['bytes']:8d} B")
    print(f"total {total} bytes in {len(manifest)} files")
    assert total < 3_000_000


def write_licenses(used: dict[str, list[str]]) -> None:
    lines = [
        "# Test images: sources and licenses",
        "",
        "All files in this folder are derived (cropped, resized, re-encoded, quantized, alpha",
        "added) by `models/image/make_testimages.py` from photos bundled in the PyPI package",
        f"scikit-image {skimage.__version__} (`skimage/data/`). Licenses as stated in",
        "scikit-image's `skimage/data/_fetchers.py` docstrings (the per-image 'Notes').",
        "No image contains nudity.",
        "",
        "| source file (skimage/data) | description | license | used in |",
        "|---|---|---|---|",
    ]
    for n, files in sorted(used.items()):
        f, desc, lic = SOURCES[n]
        lines.append(f"| `{f}` | {desc} | {lic} | " + ", ".join(f"`{x}`" for x in sorted(set(files))) + " |")
    lines += ["| (none) | synthetic uniform colour (198, 134, 110), made by the script | "
              "no copyrightable content | `png_synthetic_solid_320x240.png` |"]
    lines += ["", "The derived files are released under the same terms (public domain / CC0).", ""]
    (OUT / "LICENSES.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
