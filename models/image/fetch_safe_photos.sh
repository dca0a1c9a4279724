#!/usr/bin/env bash
# Fetch safe (no nudity) photo sets for false-positive measurement into ./safe/ (NOT committed).
#   safe/skimage/            raster images bundled in PyPI scikit-image==0.25.2 (skimage/data)
#   safe/gnome-backgrounds/  Debian gnome-backgrounds 43.1-1 (CC-BY-SA-3.0/2.0, CC-BY-2.0) *.webp
#   safe/mate-backgrounds/   Debian mate-backgrounds 1.26.0-1 (GPL-2+) raster files (extra set)
# Debian packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x`
# (not installed). SVG wallpapers are skipped (they would need a rasterizer).
# Re-runnable; the scikit-image set needs the venv from requirements.txt. SETS names the sets to
# fetch (default: all three); `SETS="gnome-backgrounds mate-backgrounds"` needs no venv.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-$HERE/.venv/bin/python}"
SAFE="$HERE/safe"
DEBS="$HERE/build/debs"
GNOME_VER="43.1-1"
MATE_VER="1.26.0-1"

SETS="${SETS:-skimage gnome-backgrounds mate-backgrounds}"
wanted() { case " $SETS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for set in $SETS; do
  case "$set" in
    skimage | gnome-backgrounds | mate-backgrounds) ;;
    *) echo "unknown set '$set' (skimage, gnome-backgrounds, mate-backgrounds)" >&2; exit 2 ;;
  esac
done

mkdir -p "$SAFE" "$DEBS"

# 1. scikit-image bundled data
if wanted skimage; then
  SKD="$("$PY" -c 'import os, skimage.data as d; print(os.path.dirname(d.__file__))')"
  "$PY" -c 'import skimage; assert skimage.__version__ == "0.25.2", skimage.__version__'
  rm -rf "$SAFE/skimage"; mkdir -p "$SAFE/skimage"
  for f in "$SKD"/*.png "$SKD"/*.jpg "$SKD"/*.gif; do
    case "$(basename "$f")" in
      chessboard_*) continue ;;  # synthetic 200x200 chessboards, not photos
    esac
    cp "$f" "$SAFE/skimage/"
  done
fi

# 2. Debian packages (apt-get download needs readable apt lists: run `apt-get update` once)
fetch_deb() {  # name version
  local name="$1" ver="$2" deb
  deb="$(ls "$DEBS"/${name}_${ver/:/%3a}_*.deb 2>/dev/null | head -n1 || true)"
  if [ -z "$deb" ]; then
    (cd "$DEBS" && apt-get download "${name}=${ver}" >/dev/null 2>&1 \
       || (cd "$DEBS" && apt-get download "${name}=${ver}"))
    deb="$(ls "$DEBS"/${name}_${ver/:/%3a}_*.deb | head -n1)"
  fi
  echo "$deb"
}

debs=()
unpack() {  # name version: the deb unpacked into $DEBS/x-<name>, $SAFE/<name> emptied
  local name="$1" deb
  deb="$(fetch_deb "$name" "$2")"
  debs+=("$deb")
  rm -rf "$SAFE/$name" "$DEBS/x-$name"; mkdir -p "$SAFE/$name" "$DEBS/x-$name"
  dpkg-deb -x "$deb" "$DEBS/x-$name"
  cp "$DEBS/x-$name/usr/share/doc/$name/copyright" "$SAFE/$name.copyright"
}
if wanted gnome-backgrounds; then
  unpack gnome-backgrounds "$GNOME_VER"
  find "$DEBS/x-gnome-backgrounds/usr/share/backgrounds" -type f \
    \( -iname '*.webp' -o -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) \
    -exec cp {} "$SAFE/gnome-backgrounds/" \;
fi
if wanted mate-backgrounds; then
  unpack mate-backgrounds "$MATE_VER"
  # MATE ships its wallpapers under usr/share/backgrounds/mate/<theme>/; prefix the theme dir.
  find "$DEBS/x-mate-backgrounds/usr/share/backgrounds" -type f \
    \( -iname '*.webp' -o -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) -print0 |
    while IFS= read -r -d '' f; do
      rel="${f#"$DEBS/x-mate-backgrounds/usr/share/backgrounds/"}"
      cp "$f" "$SAFE/mate-backgrounds/$(echo "$rel" | tr '/' '_')"
    done
fi

if [ "${#debs[@]}" -gt 0 ]; then
  echo "deb sha256:"; sha256sum "${debs[@]}" | sed "s|$HERE/||"
fi
total=0
for set in $SETS; do
  n="$(find "$SAFE/$set" -type f | wc -l)"
  total=$((total + n))
  echo "$set: $n images"
done
echo "total: $total images in $SAFE"
