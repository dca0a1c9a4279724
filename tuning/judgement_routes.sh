#!/usr/bin/env bash
# Server CPU per request of the judgement routes against GET /v1/workflows, interleaved in one
# pass: GET /v1/checks/{id} (a check's journal record, its workflow version and feedback) and
# POST /v1/feedback (merged into the check's feedback, a durable store commit each). One shard
# on CPU 0 with a fresh data directory; wrk on CPU 1 (`cpu-per-request --pin-wrk 1`).
#
#   cargo build --release && tuning/judgement_routes.sh [ROUNDS]
#
# Prints one line per (round, route) with microseconds of server CPU per request, then the
# median per route and its ratio to the median of GET /v1/workflows.
set -euo pipefail
rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"
bin=$root/target/release/modgate
start_server "$bin" judged
data="$work/data-judged"
judge=$("$bin" key create --org bench --scopes text,feedback --data "$data" | head -1)
id=$(curl -sf "http://127.0.0.1:$port/v1/text" -H "X-Api-Key: $judge" \
  -H 'Content-Type: application/json' -d '{"text": "You are an idiot.", "workflow": "fast"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["request_id"])')
printf '{"request_id": "%s", "labels": {"profanity": true}, "note": "reviewed"}' "$id" >"$work/feedback.json"
curl -sf "http://127.0.0.1:$port/v1/feedback" -H "X-Api-Key: $judge" \
  -H 'Content-Type: application/json' --data-binary @"$work/feedback.json" >/dev/null

measure() { # ROUTE -> "non2xx=N us_per_request=U"
  local out
  case $1 in
    workflows) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/workflows" \
                 -H "X-Api-Key: $judge" --pin-wrk 1 --seconds 6 --connections 16) ;;
    explain) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/checks/$id" \
                 -H "X-Api-Key: $judge" --pin-wrk 1 --seconds 6 --connections 16) ;;
    feedback) out=$("$tool" --pid "$pid" --url "http://127.0.0.1:$port/v1/feedback" \
                 --method POST --body-file "$work/feedback.json" -H "X-Api-Key: $judge" \
                 -H "Content-Type: application/json" --pin-wrk 1 --seconds 6 --connections 16) ;;
  esac
  echo "$out" | tail -1 | grep -o 'non2xx=[0-9]*\|us_per_request=[0-9.]*' | tr '\n' ' '
}

results="$work/results"
for round in $(seq "$rounds"); do
  for route in workflows explain feedback; do
    line="round=$round route=$route $(measure "$route")"
    echo "$line"
    echo "$line" >>"$results"
  done
done
python3 - "$results" <<'PY'
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    route = re.search(r"route=(\S+)", line).group(1)
    us = re.search(r"us_per_request=([0-9.]+)", line)
    if us:
        by.setdefault(route, []).append(float(us.group(1)))
base = statistics.median(by["workflows"])
for route, values in by.items():
    median = statistics.median(values)
    print(f"median route={route} us_per_request={median:.1f} ratio_to_workflows={median / base:.2f}")
PY
