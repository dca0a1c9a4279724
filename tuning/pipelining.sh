#!/usr/bin/env bash
# One keep-alive client that pipelines and keeps its socket full, on one shard (issue 13: such
# a client cannot hold the shard). Two binaries, interleaved; per round and binary:
# - 1 KiB texts, 4 closed-loop connections, alone and beside a client pipelining GET /health
#   (their throughput and p99 beside it);
# - the pipelining client alone, pipelining 1 KiB text checks: its answers per second and the
#   server's CPU per answer (what the rule costs a client that is alone).
# The server runs one shard on CPU 0; the loads run on CPU 1, the pipelining client under
# SCHED_IDLE so that it does not take the load tool's CPU.
#
#   tuning/pipelining.sh BIN_BEFORE BIN_AFTER [ROUNDS]
set -euo pipefail
before=$1 after=$2 rounds=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
client="$root/tuning/pipelining_client.py"
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
seconds=${PIPE_SECONDS:-6}
. "$root/tuning/lib.sh"
text_scenario "$work/text.toml"

texts() { # JSON
  "$load" --scenario "$work/text.toml" --server "http://127.0.0.1:$port" --key "$key" --cpu 1 \
    --quiet --duration "${seconds}s" --connections 4 --json "$1" >/dev/null
}
field() { python3 -c "import json,sys; r=json.load(open('$1')); print($2)"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

for round in $(seq "$rounds"); do
  for name in $(binaries_in_order "$round"); do
    bin=$before; [ "$name" = after ] && bin=$after
    start_server "$bin" "$name-$round"
    texts "$work/alone.json"
    taskset -c 1 chrt --idle 0 python3 "$client" health "$port" $((seconds + 2)) >/dev/null &
    sleep 1
    texts "$work/beside.json"
    wait $!
    alone=$(field "$work/alone.json" "r['throughput_per_s']")
    beside=$(field "$work/beside.json" "r['throughput_per_s']")
    p99=$(field "$work/beside.json" "r['latency']['p99_us'] / 1000")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    start_server "$bin" "$name-$round-alone"
    ticks=$(cpu_ticks)
    rate=$(taskset -c 1 python3 "$client" text "$port" "$seconds" "$key")
    ticks=$(( $(cpu_ticks) - ticks ))
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "round $round $name: texts beside a pipelining client $(python3 -c "print(round(100 * $beside / $alone))") % of alone (p99 $p99 ms);" \
      "a client pipelining texts alone: $rate/s, $(python3 -c "print(round($ticks * 10000 / ($rate * $seconds), 1))") us of server CPU per answer"
  done
done
