#!/usr/bin/env bash
# Server CPU per request of two modgate binaries, interleaved in one pass, so that the noise of
# this machine falls on both alike. Each binary serves one shard on CPU 0 with a fresh data
# directory and a `pro` plan key (its rate raised past what one core answers); wrk runs on CPU 1 (`cpu-per-request --pin-wrk 1`).
#
#   tuning/cpu_compare.sh BIN_BEFORE BIN_AFTER [ROUNDS]
#   ROUTES="workflows text" tuning/cpu_compare.sh ...   (a subset of the routes)
#   TEXT="a sentence " tuning/cpu_compare.sh ...         (the text route's sentence, ASCII,
#                                                         repeated to 1 KiB; by default the
#                                                         1 KiB of tuning/text_1k.txt)
#
# Routes: GET /v1/workflows, POST /v1/text with a 1 KiB text, POST /v1/image with the 1 MP
# JPEG of the test images, and (only when named in ROUTES) `perspective`: Perspective's
# POST /v1alpha1/comments:analyze with the same text and TOXICITY, sent without `languages`
# (the same text every time: after the first, tox-block's windows are kept on the shard). The binaries take turns at running first (`binaries_in_order`).
# Prints one line per (round, binary, route) with microseconds of server CPU per request, then
# the median per binary and route and in how many rounds the new binary (the second
# argument) was the cheaper.
set -euo pipefail
before=$1 after=$2 rounds=${3:-3}
routes=${ROUTES:-workflows text image}
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"
TEXT=${TEXT:-} python3 -c "
import json, os
sentence = os.environ['TEXT']
if sentence:
    text = (sentence * (1024 // len(sentence) + 1))[:1024]
else:
    text = open('$root/tuning/text_1k.txt').read()[:1024]
open('$work/text.json','w').write(json.dumps({'text': text}))
open('$work/perspective.json','w').write(json.dumps(
    {'comment': {'text': text}, 'requestedAttributes': {'TOXICITY': {}}}))
"
cp "$root/models/image/testimages/jpeg_baseline_retina_1152x864_1mp.jpg" "$work/image.jpg"

measure() { # NAME ROUTE -> us per request
  local route=$1 out
  case $route in
    workflows) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/workflows" \
                 -H "X-Api-Key: $key" --pin-wrk 1 --seconds 6 --connections 16) ;;
    text) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/text" --method POST \
                 --body-file "$work/text.json" -H "X-Api-Key: $key" \
                 -H "Content-Type: application/json" --pin-wrk 1 --seconds 6 --connections 16) ;;
    perspective) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1alpha1/comments:analyze" \
                 --method POST --body-file "$work/perspective.json" -H "X-Api-Key: $key" \
                 -H "Content-Type: application/json" --pin-wrk 1 --seconds 6 --connections 16) ;;
    image) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/image" --method POST \
                 --body-file "$work/image.jpg" -H "X-Api-Key: $key" --pin-wrk 1 --seconds 8 \
                 --connections 2) ;;
  esac
  echo "$out" | tail -1 | grep -o 'non2xx=[0-9]*\|us_per_request=[0-9.]*' | tr '\n' ' '
}

results="$work/results"
for round in $(seq "$rounds"); do
  for name in $(binaries_in_order "$round"); do
    bin=$before; [ $name = after ] && bin=$after
    start_server "$bin" "$name-$round"
    for route in $routes; do
      line=$(measure "$route")
      echo "round=$round binary=$name route=$route $line" | tee -a "$results"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
python3 - "$results" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split())
    rows.setdefault((f["route"], f["binary"]), []).append(float(f["us_per_request"]))
for route in dict.fromkeys(r for r, _ in rows):
    b, a = statistics.median(rows[(route, "before")]), statistics.median(rows[(route, "after")])
    print(f"{route:10s} before {b:10.1f} us  after {a:10.1f} us  after/before {a / b:.3f}")
PY
rounds_lower "$results" route us_per_request
