#!/usr/bin/env bash
# Fairness on one shard (issue 13): image throughput alone, beside a saturating text load, and
# beside one keep-alive client hammering /health; /health's median and p99 meanwhile. Two binaries,
# interleaved. The server runs one shard on CPU 0, every load on CPU 1.
#
#   tuning/fairness.sh BIN_BEFORE BIN_AFTER [ROUNDS]
set -euo pipefail
before=$1 after=$2 rounds=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
seconds=${FAIR_SECONDS:-15}
. "$root/tuning/lib.sh"
text_scenario "$work/text.toml"
cat >"$work/image.toml" <<TOML
name = "image-1mp"
description = "POST /v1/image, a 1 MP JPEG"
workflow = "default"
[[requests]]
name = "jpeg-1mp"
kind = "image"
weight = 1
image = "$root/models/image/testimages/jpeg_baseline_retina_1152x864_1mp.jpg"
TOML

loadrun() { # SCENARIO JSON ARGS...
  local scenario=$1 json=$2; shift 2
  "$load" --scenario "$scenario" --server "http://127.0.0.1:$port" --key "$key" --cpu 1 --quiet \
    --warmup 2s --duration "${seconds}s" --json "$json" "$@" >/dev/null
}
field() { python3 -c "import json,sys; r=json.load(open('$1')); print($2)"; }

for round in $(seq "$rounds"); do
  for name in $(binaries_in_order "$round"); do
    bin=$before; [ "$name" = after ] && bin=$after
    start_server "$bin" "$name-$round"
    loadrun "$work/image.toml" "$work/alone.json" --connections 4
    alone=$(field "$work/alone.json" "round(r['throughput_per_s'], 1)")
    loadrun "$work/text.toml" "$work/text.json" --connections 32 &
    t=$!
    loadrun health "$work/health.json" --rate 100 &
    h=$!
    loadrun "$work/image.toml" "$work/mixed.json" --connections 4
    wait "$t" "$h"
    mixed=$(field "$work/mixed.json" "round(r['throughput_per_s'], 1)")
    texts=$(field "$work/text.json" "round(r['throughput_per_s'])")
    health_p50=$(field "$work/health.json" "r['latency']['p50_us'] / 1000")
    health_p99=$(field "$work/health.json" "r['latency']['p99_us'] / 1000")
    taskset -c 1 wrk -t1 -c1 -d"$((seconds + 2))s" "http://127.0.0.1:$port/health" >"$work/wrk.out" &
    w=$!
    loadrun "$work/image.toml" "$work/hammer.json" --connections 4
    wait "$w"
    hammered=$(field "$work/hammer.json" "round(r['throughput_per_s'], 1)")
    health_rps=$(awk '/Requests\/sec/ {print int($2)}' "$work/wrk.out")
    echo "round $round $name: images alone $alone/s; beside texts $mixed/s ($(python3 -c "print(round(100 * $mixed / $alone))") %, texts $texts/s, /health p50 $health_p50 ms, p99 $health_p99 ms); beside one /health client $hammered/s ($(python3 -c "print(round(100 * $hammered / $alone))") %, /health $health_rps/s)"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
