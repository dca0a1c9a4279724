#!/usr/bin/env bash
# vendor/glommio: glommio 0.9.0 as published on crates.io (the archive's sha256 is pinned
# below, the one Cargo.lock held), without the parts of its bundled liburing that its build does
# not use, with vendor/glommio.patch applied. vendor/README.md says why.
#
#   vendor/glommio.sh           re-create vendor/glommio from the archive and the patch
#   vendor/glommio.sh --check   fail unless vendor/glommio is exactly that (make lint runs it)
#   vendor/glommio.sh --diff    print the patch of vendor/glommio against the archive (after
#                               editing the vendored files: > vendor/glommio.patch)
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
url=https://static.crates.io/crates/glommio/glommio-0.9.0.crate
sha256=e1f8bc1fce949d18098dc0a4e861314e40351a0144ebf61e59bdb5254a2273b2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

curl -sSfL --retry 3 -o "$work/glommio.crate" "$url"
echo "$sha256  $work/glommio.crate" | sha256sum --check --quiet
tar -xzf "$work/glommio.crate" -C "$work"
mv "$work/glommio-0.9.0" "$work/a"
# liburing's tests, manual pages, examples and Debian packaging: build.rs compiles only its
# src/ after running its configure script.
rm -rf "$work"/a/liburing/{test,man,examples,debian}

case "${1:-}" in
--diff)
  cp -r "$here/glommio" "$work/b"
  cd "$work"
  # a/ and b/ paths, no timestamps: what `git apply` reads
  diff -ruN a b | sed -E 's#^(---|\+\+\+) ([ab]/[^\t]*).*#\1 \2#' || true
  ;;
--check)
  (cd "$work/a" && git apply --allow-empty -p1 "$here/glommio.patch")
  diff -r "$work/a" glommio >&2 ||
    { echo "vendor/glommio differs from glommio 0.9.0 + vendor/glommio.patch" >&2; exit 1; }
  echo "vendor/glommio: glommio 0.9.0 (sha256 verified) + vendor/glommio.patch"
  ;;
"")
  (cd "$work/a" && git apply --allow-empty -p1 "$here/glommio.patch")
  rm -rf glommio
  mv "$work/a" glommio
  ;;
*) echo "usage: vendor/glommio.sh [--check | --diff]" >&2; exit 2 ;;
esac
