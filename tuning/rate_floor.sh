#!/usr/bin/env bash
# The floor of issue 13's "1,000/s at 1.5 times saturated": server CPU per `GET /health` at an
# open-loop rate and saturated, for the raw tokio + httparse server (`modgate-baseline`,
# loadtest/src/bin/baseline.rs) and for a modgate binary, interleaved in one pass. Both answer
# `/health` without work, so what the rate adds is the cost of sleeping and waking per request.
# Each serves on CPU 0; modgate-load runs on CPU 1.
#
#   tuning/rate_floor.sh [MODGATE_BINARY] [ROUNDS]     (default: target/release/modgate, 2)
#   RATE=2000 tuning/rate_floor.sh ...                  (default 1000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/modgate}
rounds=${2:-2}
rate=${RATE:-1000}
baseline=${BASELINE:-$root/target/release/modgate-baseline}
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"

cpu() { # PID URL LOAD_ARGS... -> "CPU_US P99"
  local pid=$1 url=$2; shift 2
  "$load" --scenario health --server "$url" --key unused --cpu 1 --quiet --server-pid "$pid" \
    --json "$work/report.json" "$@" >/dev/null
  python3 - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['server_cpu_us_per_answer']:.1f} {r['latency']['p99_us'] / 1000:.2f}")
PY
}

measure() { # NAME PID URL
  local rated saturated
  rated=$(cpu "$2" "$3" --rate "$rate" --duration 15s)
  saturated=$(cpu "$2" "$3" --connections 16 --duration 10s)
  read -r r_us r_p99 <<<"$rated"
  read -r s_us s_p99 <<<"$saturated"
  echo "round=$round server=$1 rate$rate=${r_us}us p99=${r_p99}ms saturated=${s_us}us" \
    "p99=${s_p99}ms ratio=$(python3 -c "print(round($r_us / $s_us, 2))")"
}

for round in $(seq "$rounds"); do
  start_baseline "$baseline"
  measure baseline "$pid" "$url"
  kill "$pid"; wait "$pid" 2>/dev/null || true

  start_server "$bin" "modgate-$round"
  measure modgate "$pid" "http://127.0.0.1:$port"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
