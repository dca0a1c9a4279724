#!/usr/bin/env bash
# modgate's HTTP layer against the floor: server CPU per authenticated `GET /v1/workflows` of a
# modgate binary, and per `GET /health` of `modgate-baseline` (a raw tokio + httparse server,
# loadtest/src/bin/baseline.rs), interleaved in one pass. Each serves on CPU 0; wrk runs on
# CPU 1 (`cpu-per-request --pin-wrk 1`).
#
#   tuning/http_floor.sh [MODGATE_BINARY] [ROUNDS]
#     (default: target/release/modgate, 3; the baseline from target/release/modgate-baseline)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/modgate}
rounds=${2:-3}
baseline=${BASELINE:-$root/target/release/modgate-baseline}
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"

measure() { # PID URL [HEADER] -> us per request
  "$tool" --pid "$1" --url "$2" ${3:+-H "$3"} --pin-wrk 1 --seconds 8 --connections 16 \
    | tail -1 | grep -o 'us_per_request=[0-9.]*' | cut -d= -f2
}

results="$work/results"
for round in $(seq "$rounds"); do
  start_baseline "$baseline"
  b=$(measure "$pid" "$url/health")
  kill "$pid"; wait "$pid" 2>/dev/null || true

  data="$work/data-$round"
  taskset -c 0 "$bin" serve --data "$data" --listen 127.0.0.1:0 --cores 1 \
    --models "$root/models" --log-level warn >"$work/modgate.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    url=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/modgate.out" | grep -o 'http.*' || true)
    if [ -n "$url" ] && curl -sf "$url/health" >/dev/null; then break; fi
    sleep 0.2
  done
  key=$(bench_key "$bin" --data "$data")
  m=$(measure "$pid" "$url/v1/workflows" "Authorization: Bearer $key")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "round $round: baseline /health $b us, modgate /v1/workflows $m us (ratio $(python3 -c "print(round($m / $b, 3))"))" | tee -a "$results"
done
