#!/usr/bin/env bash
# Fairness on one shard (issue 13): image throughput alone, beside a saturating text load, and
# beside one keep-alive client hammering /health; /health's p99 meanwhile. Two binaries,
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
python3 - "$work" "$root" <<'PY'
import sys
work, root = sys.argv[1], sys.argv[2]
text = ('Thanks for the quick reply, the parcel arrived on time and the fit is fine. ' * 14)[:1024]
open(f'{work}/text.toml', 'w').write(f'''name = "text-1k"
description = "POST /v1/text, 1 KiB"
workflow = "default"
[[requests]]
name = "text-1k"
kind = "text"
weight = 1
text = "{text}"
''')
open(f'{work}/image.toml', 'w').write(f'''name = "image-1mp"
description = "POST /v1/image, a 1 MP JPEG"
workflow = "default"
[[requests]]
name = "jpeg-1mp"
kind = "image"
weight = 1
image = "{root}/models/image/testimages/jpeg_baseline_retina_1152x864_1mp.jpg"
''')
PY

start() { # BIN NAME -> pid, port, key
  local bin=$1 data="$work/data-$2"
  taskset -c 0 "$bin" serve --data "$data" --listen 127.0.0.1:0 --cores 1 \
    --models "$root/models" --metrics-listen off --log-level warn >"$work/$2.out" 2>&1 &
  pid=$!
  for _ in $(seq 150); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$2.out" | grep -o '[0-9]*$' || true)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
      "$bin" org create bench --plan pro --data "$data" >/dev/null
      "$bin" org set-limits bench --rate-per-s 1000000 --rate-burst 1000000 \
        --concurrent-max 100000 --quota-per-month 1000000000 --data "$data" >/dev/null
      key=$("$bin" key create --org bench --data "$data" | head -1)
      return 0
    fi
    sleep 0.2
  done
  echo "server did not start" >&2; cat "$work/$2.out" >&2; exit 1
}
loadrun() { # SCENARIO JSON ARGS...
  local scenario=$1 json=$2; shift 2
  "$load" --scenario "$scenario" --server "http://127.0.0.1:$port" --key "$key" --cpu 1 --quiet \
    --warmup 2s --duration "${seconds}s" --json "$json" "$@" >/dev/null
}
field() { python3 -c "import json,sys; r=json.load(open('$1')); print($2)"; }

for round in $(seq "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    start "$bin" "$name-$round"
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
    health_p99=$(field "$work/health.json" "r['latency']['p99_us'] / 1000")
    taskset -c 1 wrk -t1 -c1 -d"$((seconds + 2))s" "http://127.0.0.1:$port/health" >"$work/wrk.out" &
    w=$!
    loadrun "$work/image.toml" "$work/hammer.json" --connections 4
    wait "$w"
    hammered=$(field "$work/hammer.json" "round(r['throughput_per_s'], 1)")
    health_rps=$(awk '/Requests\/sec/ {print int($2)}' "$work/wrk.out")
    echo "round $round $name: images alone $alone/s; beside texts $mixed/s ($(python3 -c "print(round(100 * $mixed / $alone))") %, texts $texts/s, /health p99 $health_p99 ms); beside one /health client $hammered/s ($(python3 -c "print(round(100 * $hammered / $alone))") %, /health $health_rps/s)"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
