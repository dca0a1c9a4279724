#!/usr/bin/env python3
"""Resident memory of a one-shard server before, during and after a run of images through a
workflow of image checks, and while it idles afterwards: what a burst of large images leaves
behind (docs/running-as-a-service.md#memory).

    python3 tuning/memory_after_images.py BIN [IMAGES] [CHECKS]

BIN: the modgate binary; IMAGES: how many (12 by default); CHECKS: the workflow's image checks,
comma-separated ("ocr,faces" by default). The images are grey PNGs of 0.3 to 2.8 MP, drawn
here (bands of dark marks on white, the same for every run: the first 12 are 0.3 to 1.8 MP). The server runs on a fresh data
directory with the models of models/, on 127.0.0.1:18123.
"""
import os, random, shutil, struct, subprocess, sys, tempfile, time, urllib.error, urllib.request, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
checks = (sys.argv[3] if len(sys.argv) > 3 else "ocr,faces").split(",")
data = tempfile.mkdtemp(prefix="modgate-memory-")
config = os.path.join(data, "modgate.toml")
open(config, "w").write(
    "[plans.pro]\nrate_per_s = 100000\nrate_burst = 100000\nconcurrent_max = 1000\n"
    "quota_per_month = 1000000000\n[metrics]\nlisten = \"\"\n")
def admin(*args):
    return subprocess.run([binary, *args, "--data", data, "--config", config],
                          capture_output=True, text=True, check=True).stdout
workflows = os.path.join(data, "workflows.toml")
open(workflows, "w").write(
    "[workflows.pixels]\ndescription = \"image checks under test\"\nimage_checks = [%s]\n"
    "[workflows.pixels.categories]\n" % ", ".join('"%s"' % c for c in checks))
admin("org", "create", "acme", "--plan", "pro")
key = admin("key", "create", "--org", "acme").splitlines()[0].strip()
admin("workflow", "import", workflows)
server = subprocess.Popen(
    [binary, "serve", "--listen", "127.0.0.1:18123", "--data", data, "--config", config,
     "--cores", "1", "--models", os.path.join(ROOT, "models")],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    while "127.0.0.1:18123" not in (line := server.stdout.readline()):
        if not line:
            sys.exit("the server stopped before listening")

    def resident_mb():
        for line in open(f"/proc/{server.pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024

    def png(width, height, seed):
        rng = random.Random(seed)
        rows = bytearray()
        for y in range(height):
            rows.append(0)
            band = (y // 40) % 2
            rows += bytes((255 if (x // 7 + y // 9 + band) % 3 else rng.randrange(0, 80))
                          for x in range(width))
        chunk = lambda kind, body: (struct.pack(">I", len(body)) + kind + body
                                    + struct.pack(">I", zlib.crc32(kind + body)))
        return (b"\x89PNG\r\n\x1a\n"
                + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))

    time.sleep(1)
    print("idle", resident_mb(), "MB")
    for i in range(count):
        width = random.Random(i).randrange(300, 2000)
        height = random.Random(i + 99).randrange(200, 1400)
        request = urllib.request.Request(
            "http://127.0.0.1:18123/v1/image?workflow=pixels", data=png(width, height, i),
            headers={"X-Api-Key": key, "Content-Type": "application/octet-stream"})
        started = time.time()
        try:
            status = urllib.request.urlopen(request, timeout=120).status
        except urllib.error.HTTPError as error:
            status = error.code
        print(i, f"{width}x{height}", status, f"{time.time() - started:.2f} s",
              resident_mb(), "MB", flush=True)
    for wait in (2, 10, 30):
        time.sleep(wait)
        print(f"after {wait} s idle", resident_mb(), "MB")
finally:
    server.terminate()
    server.wait()
    shutil.rmtree(data, ignore_errors=True)
