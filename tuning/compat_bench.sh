#!/usr/bin/env bash
# Server CPU per request of each hosted-API route against the native route running the same
# checks on the same text, in one pass (interleaved rounds, one server): what the compat layer
# itself costs. One shard on CPU 0, wrk on CPU 1 (`cpu-per-request --pin-wrk 1`).
#
#   tuning/compat_bench.sh [MODGATE_BINARY] [ROUNDS]   (default: target/release/modgate, 3)
#
# Pairs: POST /v1/moderations (workflow `moderation` through OpenAI's model name) against
# POST /v1/text with workflow `moderation`; POST /v1alpha1/comments:analyze with TOXICITY
# against POST /v1/text with workflow `perspective` (the same 1 KiB text throughout); and
# Sightengine's POST /1.0/check.json with models=nudity against POST /v1/image (the 1 MP test
# JPEG, the `default` workflow's two nudity models).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/modgate}
rounds=${2:-3}
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
python3 - "$work" "$root/tuning/text_1k.txt" <<'PY'
import json, sys
work = sys.argv[1]
text = open(sys.argv[2]).read()[:1024]
bodies = {
    "native-moderation": {"text": text, "workflow": "moderation"},
    "moderations": {"input": text, "model": "omni-moderation-latest"},
    "native-perspective": {"text": text, "workflow": "perspective"},
    "perspective": {"comment": {"text": text}, "requestedAttributes": {"TOXICITY": {}}},
}
for name, body in bodies.items():
    open(f"{work}/{name}.body", "w").write(json.dumps(body))
PY
cp "$root/models/image/testimages/jpeg_baseline_retina_1152x864_1mp.jpg" "$work/native-image.body"
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
image = open(f"{work}/native-image.body", "rb").read()
boundary = b"compatBenchBoundary"
form = (b"--" + boundary + b'\r\nContent-Disposition: form-data; name="models"\r\n\r\nnudity\r\n'
        + b"--" + boundary + b'\r\nContent-Disposition: form-data; name="media"; filename="a.jpg"\r\n'
        + b"Content-Type: image/jpeg\r\n\r\n" + image + b"\r\n--" + boundary + b"--\r\n")
open(f"{work}/check.body", "wb").write(form)
PY
. "$root/tuning/lib.sh"
start_server "$bin" server

measure() { # NAME PATH [CONTENT_TYPE CONNECTIONS] -> us per request
  "$tool" --pid "$pid" --url "http://127.0.0.1:$port$2" --method POST --body-file "$work/$1.body" \
    -H "X-Api-Key: $key" -H "Content-Type: ${3:-application/json}" --pin-wrk 1 --seconds 6 \
    --connections "${4:-16}" | tail -1 | grep -o 'non2xx=[0-9]*\|us_per_request=[0-9.]*' | tr '\n' ' '
}
results="$work/results"
for round in $(seq "$rounds"); do
  for pair in "native-moderation /v1/text" "moderations /v1/moderations" \
              "native-perspective /v1/text" "perspective /v1alpha1/comments:analyze?key=$key"; do
    set -- $pair
    line=$(measure "$1" "$2")
    echo "round=$round route=$1 $line" | tee -a "$results"
  done
  line=$(measure native-image /v1/image application/octet-stream 2)
  echo "round=$round route=native-image $line" | tee -a "$results"
  line=$(measure check /1.0/check.json "multipart/form-data; boundary=compatBenchBoundary" 2)
  echo "round=$round route=check $line" | tee -a "$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split())
    rows.setdefault(f["route"], []).append(float(f["us_per_request"]))
med = {route: statistics.median(v) for route, v in rows.items()}
for compat, native in [("moderations", "native-moderation"), ("perspective", "native-perspective"),
                       ("check", "native-image")]:
    print(f"{compat:<12} {med[compat]:8.1f} us   {native:<19} {med[native]:8.1f} us   ratio {med[compat] / med[native]:.3f}")
PY
