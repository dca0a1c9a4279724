#!/usr/bin/env bash
# Results kept for repeats, for two modgate binaries interleaved in one pass: what a file or text
# sent again costs, what new ones cost, and how long a repeat waits while the model worker is
# busy. Each binary serves one shard on CPU 0 on its defaults (results kept: the point here,
# where the other scripts turn them off) with a fresh data directory; the load runs on CPU 1.
#
#   tuning/repeats.sh BIN_BEFORE BIN_AFTER [ROUNDS]
#
# Per (round, binary):
# - new images: the 1 MP test JPEG with 8 more bytes after its end, a counter, so that every
#   file is new (decoders stop at the end of the image), 2 connections for 12 s (wrk); server
#   CPU per check from /proc/PID/stat;
# - a repeated image's latency beside them: one client sends the same JPEG 150 times, 0.1 s
#   apart (after a first check that keeps its result), while wrk sends new ones throughout;
# - a repeated image alone, and a repeated 1 KiB text on the `moderation` workflow (tox-block):
#   server CPU per check (`cpu-per-request`, 2 and 8 connections);
# - new texts on `moderation`: 170 common words drawn at random per request (every tox-block
#   window new), 8 connections for 8 s.
# The binaries take turns at running first (`binaries_in_order`).
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
image=$root/models/image/testimages/jpeg_baseline_retina_1152x864_1mp.jpg
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"

cat >"$work/new_images.lua" <<LUA
local f = assert(io.open("$image", "rb"))
local image = f:read("*all")
f:close()
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/image?workflow=default", nil, image .. string.format("%08d", n))
end
LUA
cat >"$work/new_texts.lua" <<'LUA'
local words = {"you", "are", "a", "good", "person", "and", "i", "like", "your", "work", "the",
  "this", "that", "is", "not", "what", "we", "they", "have", "it", "was", "for", "on", "with",
  "he", "as", "at", "be", "by", "from", "or", "an", "but", "all", "were", "when", "there", "can",
  "more", "if", "no", "out", "so", "said", "up", "its", "about", "into", "than", "them"}
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
math.randomseed(os.time())
request = function()
  local text = {}
  for i = 1, 170 do text[i] = words[math.random(#words)] end
  return wrk.format(nil, "/v1/text", nil,
    '{"text":"' .. table.concat(text, " ") .. '","workflow":"moderation"}')
end
LUA
python3 - "$work/text.json" "$root/tuning/text_1k.txt" <<'PY'
import json, sys
text = open(sys.argv[2]).read()[:1024]
open(sys.argv[1], "w").write(json.dumps({"text": text, "workflow": "moderation"}))
PY
cat >"$work/repeat.py" <<'PY'
import http.client, sys, time
port, key, image = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
connection = http.client.HTTPConnection("127.0.0.1", port)
def check():
    started = time.perf_counter()
    connection.request("POST", "/v1/image?workflow=default", image,
                       {"X-Api-Key": key, "Content-Type": "application/octet-stream"})
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
    return (time.perf_counter() - started) * 1000
check()
times = []
for _ in range(150):
    times.append(check())
    time.sleep(0.1)
times.sort()
print(f"p50={times[75]:.2f} p99={times[148]:.2f} max={times[-1]:.2f}")
PY

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# wrk_cpu SCRIPT CONNECTIONS SECONDS PATH: server CPU µs per request of a wrk run.
wrk_cpu() {
  local ticks out requests
  ticks=$(cpu_ticks "$pid")
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"$3"s -s "$1" -H "X-Api-Key: $key" "http://127.0.0.1:$port$4")
  requests=$(echo "$out" | grep -o '[0-9]* requests in' | grep -o '^[0-9]*' || true)
  if [ -z "$requests" ] || [ "$requests" = 0 ]; then echo NA; return; fi
  python3 -c "print(round(($(cpu_ticks "$pid") - $ticks) * 1e6 / $(getconf CLK_TCK) / $requests, 1))"
  echo "$out" | grep -q 'Non-2xx' && echo "(wrk: $(echo "$out" | grep 'Non-2xx'))" >&2 || true
}

for round in $(seq "$rounds"); do
  for name in $(binaries_in_order "$round"); do
    if [ "$name" = before ]; then bin=$before; else bin=$after; fi
    start_server "$bin" "$name-$round" defaults
    taskset -c 1 wrk -t1 -c2 -d2s -s "$work/new_images.lua" -H "X-Api-Key: $key" \
      "http://127.0.0.1:$port/" >/dev/null
    new_image=$(wrk_cpu "$work/new_images.lua" 2 12 /)
    # Longer than the repeats can take (150 of 0.1 s and up to 0.1 s each), stopped after them.
    taskset -c 1 wrk -t1 -c2 -d60s -s "$work/new_images.lua" -H "X-Api-Key: $key" \
      "http://127.0.0.1:$port/" >/dev/null &
    busy=$!
    sleep 2
    waiting=$(taskset -c 1 python3 "$work/repeat.py" "$port" "$key" "$image" || echo failed)
    kill "$busy" 2>/dev/null || true
    wait "$busy" 2>/dev/null || true
    repeated_image=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/image?workflow=default" \
      --method POST --body-file "$image" -H "X-Api-Key: $key" --pin-wrk 1 --seconds 8 \
      --connections 2 | tail -1 | grep -o 'us_per_request=[0-9.]*' | cut -d= -f2 || echo NA)
    repeated_text=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/text" --method POST \
      --body-file "$work/text.json" -H "X-Api-Key: $key" -H "Content-Type: application/json" \
      --pin-wrk 1 --seconds 8 --connections 8 | tail -1 | grep -o 'us_per_request=[0-9.]*' | cut -d= -f2 || echo NA)
    new_text=$(wrk_cpu "$work/new_texts.lua" 8 8 /v1/text)
    echo "round=$round binary=$name new_image_us=$new_image repeated_image_us=$repeated_image repeat_beside_new_ms:$waiting repeated_text_us=$repeated_text new_text_us=$new_text"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
