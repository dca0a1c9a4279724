#!/usr/bin/env python3
"""One keep-alive connection that pipelines requests and keeps its socket full, for
tuning/pipelining.sh: `health` (GET /health) or `text` (1 KiB POST /v1/text checks, workflow
default). Prints the answers per second it got. Python 3 stdlib only.

    tuning/pipelining_client.py health|text PORT SECONDS [KEY]
"""
import json
import os
import socket
import sys
import time

kind, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if kind == "health":
    request = b"GET /health HTTP/1.1\r\nHost: bench\r\n\r\n"
else:
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "text_1k.txt")).read()[:1024]
    body = json.dumps({"text": text, "workflow": "default"}).encode()
    request = (f"POST /v1/text HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {sys.argv[4]}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
batch = request * max(1, 65536 // len(request))
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
# The answers are read by a child process, so that reading and sending never wait for each
# other's turn at the interpreter.
done_r, done_w = os.pipe()
if os.fork() == 0:
    os.close(done_r)
    answers, tail = 0, b""
    stop = time.time() + seconds
    while time.time() < stop:
        data = sock.recv(1 << 20)
        if not data:
            break
        data = tail + data
        answers += data.count(b"HTTP/1.1 200")
        tail = data[-16:]
        answers -= tail.count(b"HTTP/1.1 200")
    os.write(done_w, f"{answers / seconds:.0f}\n".encode())
    os._exit(0)
os.close(done_w)
start = time.time()
while time.time() < start + seconds:
    sock.sendall(batch)
print(os.read(done_r, 64).decode().strip())
os.wait()
