"""Runs modgate in a network namespace of its own and reports every way it tried to reach out.

Started by tests/egress.rs as `unshare --net --mount --propagation private -- python3 run.py
CONFIG.json`: inside the fresh namespace only loopback exists, /etc/resolv.conf and /etc/hosts
are bind-mounted to point at the canaries below, and modgate runs with every proxy variable set
to the proxy canary. Instruments, all on 127.0.0.1:
- a DNS canary on port 53 that records each query's name and never answers;
- a proxy canary on port 3128 that records the first line of each connection (a CONNECT to a
  telemetry host would show here) and closes it;
- an image server that records each path it is asked for and serves the test image.
It takes the demo key the fresh data directory prints, asks for two `url` checks (one by a name in /etc/hosts, to the image server; one by a name
only the DNS canary would hear of), waits `wait_s` for anything the process does on its own,
stops the server and prints one JSON object with what each instrument saw.
"""
import fcntl
import http.server
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

cfg = json.load(open(sys.argv[1]))
work = cfg["work"]
seen = {"dns": [], "proxy": [], "images": [], "checks": []}
lock = threading.Lock()


def note(kind, what):
    with lock:
        seen[kind].append(what)


def loopback_up():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    iff_up, iff_loopback, iff_running = 0x1, 0x8, 0x40
    request = struct.pack("16sH14s", b"lo", iff_up | iff_loopback | iff_running, b"")
    fcntl.ioctl(sock, 0x8914, request)  # SIOCSIFFLAGS


def dns_name(packet):
    labels, at = [], 12
    while at < len(packet) and packet[at] != 0:
        n = packet[at]
        labels.append(packet[at + 1 : at + 1 + n].decode("ascii", "replace"))
        at += 1 + n
    return ".".join(labels)


def dns_canary(sock):
    while True:
        packet, _ = sock.recvfrom(4096)
        note("dns", dns_name(packet))


def proxy_canary(sock):
    while True:
        conn, _ = sock.accept()
        conn.settimeout(2)
        try:
            note("proxy", conn.recv(4096).split(b"\r\n")[0].decode("latin-1"))
        except OSError as error:
            note("proxy", f"connection without a request line ({error})")
        conn.close()


class Images(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        note("images", self.path)
        body = open(cfg["image"], "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def bind_mount(text, target):
    path = os.path.join(work, os.path.basename(target))
    with open(path, "w") as f:
        f.write(text)
    subprocess.run(["mount", "--bind", path, target], check=True)


def request(method, path, headers):
    # No proxy for the test's own requests: they are not the server's.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(f"http://127.0.0.1:{cfg['port']}{path}", method=method, headers=headers, data=b"" if method == "POST" else None)
    try:
        with opener.open(req, timeout=15) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


loopback_up()
bind_mount("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n", "/etc/resolv.conf")
bind_mount("127.0.0.1 localhost\n127.0.0.1 images.canary.test\n", "/etc/hosts")
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dns.bind(("127.0.0.1", 53))
proxy = socket.socket()
proxy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
proxy.bind(("127.0.0.1", 3128))
proxy.listen(64)
images = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Images)
for target, arg in ((dns_canary, dns), (proxy_canary, proxy), (images.serve_forever, None)):
    threading.Thread(target=target, args=(arg,) if arg else (), daemon=True).start()

env = dict(os.environ)
for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
    env[name] = "http://127.0.0.1:3128"
# As a production host: no proxy exceptions, and none of the variables by which a library
# could tell it runs in CI and keep quiet there only (ONNX Runtime reads some).
for name in ("NO_PROXY", "no_proxy", "CI", "TF_BUILD", "GITHUB_ACTIONS", "ORT_DISABLE_TELEMETRY"):
    env.pop(name, None)
server = subprocess.Popen(cfg["command"], env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "w"), text=True)
demo_key = []


def read_stdout():
    for line in server.stdout:
        if line.startswith("demo key: "):
            demo_key.append(line.split()[-1])


threading.Thread(target=read_stdout, daemon=True).start()
started = time.time()
while request("GET", "/health", {}) != 200 or not demo_key:
    if server.poll() is not None or time.time() - started > 60:
        print(json.dumps({"error": "the server did not start", "log": open(os.path.join(work, "server.log")).read()[-2000:]}))
        sys.exit(1)
    time.sleep(0.1)
key = {"X-Api-Key": demo_key[0]}
image_port = images.server_address[1]
for url in (f"http://images.canary.test:{image_port}/asked.jpg", "http://asked.canary.test/other.jpg"):
    status = request("POST", "/v1/image?url=" + urllib.parse.quote(url, safe=""), key)
    note("checks", [url, status])
time.sleep(max(0.0, cfg["wait_s"] - (time.time() - started)))
server.send_signal(signal.SIGTERM)
try:
    server.wait(timeout=20)
except subprocess.TimeoutExpired:
    server.kill()
with lock:
    print(json.dumps(seen))
