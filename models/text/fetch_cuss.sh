#!/usr/bin/env bash
# Fetch npm cuss@2.2.0 (MIT, Titus Wormer) and export its English word -> rating map.
#   cuss.json     plain JSON object {"word or phrase": rating}, keys sorted (JS code-unit order)
#   cuss.LICENSE  the package's license file, verbatim
# Rating (from the package README): how likely the term is used as a profanity, NOT how vulgar it is
#   2 = likely a profanity, unlikely in clean text   (e.g. "asshat")
#   1 = maybe / maybe                                 (e.g. "addict")
#   0 = unlikely a profanity, likely in clean text   (e.g. "beaver")
# Needs: npm, node >= 14, python3 (integrity check). Usage: ./fetch_cuss.sh [OUT_DIR]
set -euo pipefail
VERSION="2.2.0"
INTEGRITY="sha512-3hlHOhMiZ6YdHY5LPUhfxlx1Pj14eGttv2l9ADB1Lkv7e/us5XD798wrVLJ9DHmDO8SzCDuA+ItByFZ3M1dIYg=="
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

(cd "$TMP" && npm pack --silent "cuss@${VERSION}" >/dev/null)
TGZ="$TMP/cuss-${VERSION}.tgz"
[ -f "$TGZ" ] || { echo "npm pack did not produce $TGZ" >&2; exit 1; }
GOT="sha512-$(python3 -c 'import base64,hashlib,sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1],"rb").read()).digest()).decode())' "$TGZ")"
[ "$GOT" = "$INTEGRITY" ] || { echo "integrity mismatch: $GOT" >&2; exit 1; }
tar -xzf "$TGZ" -C "$TMP"

node --input-type=module - "$TMP/package/index.js" "$OUT/cuss.json" <<'JS'
import {writeFileSync} from 'node:fs'
import {pathToFileURL} from 'node:url'
const [src, dst] = process.argv.slice(2)
const {cuss} = await import(pathToFileURL(src).href)
const out = {}
const hist = {0: 0, 1: 0, 2: 0}
for (const key of Object.keys(cuss).sort()) {
  const r = cuss[key]
  if (!Number.isInteger(r) || r < 0 || r > 2) throw new Error(`bad rating ${key}: ${r}`)
  out[key] = r
  hist[r]++
}
writeFileSync(dst, JSON.stringify(out, null, 1) + '\n')
console.log(`cuss.json: ${Object.keys(out).length} entries, ratings 0/1/2 = ${hist[0]}/${hist[1]}/${hist[2]}`)
JS
cp "$TMP/package/license" "$OUT/cuss.LICENSE"
echo "wrote $OUT/cuss.json and $OUT/cuss.LICENSE"
