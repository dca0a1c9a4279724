#!/usr/bin/env bash
# Server CPU per text check at an ordinary rate and at saturation, for two modgate binaries
# interleaved in one pass (this machine is noisy: compare within a run). Each binary serves one
# shard on CPU 0 with a fresh data directory; the load runs on CPU 1.
#
#   tuning/rate_cpu.sh BIN_BEFORE BIN_AFTER [ROUNDS]
#   RATES="1000 2000" tuning/rate_cpu.sh ...       (open-loop rates, default 1000)
#   DISK_WRITER=1 tuning/rate_cpu.sh ...           (a bulk writer on the data directory's disk)
#   FRESH=1 WORKFLOW=moderation tuning/rate_cpu.sh ...  (servers on their defaults, every text
#                                                   new: modgate-load's `fresh`; a workflow)
#
# Per (round, binary): modgate-load at each rate (1 KiB texts, workflow default, 20 s) with the
# server's CPU per answer and the latency percentiles, then 32 connections back to back
# (saturated). With DISK_WRITER=1, `dd` writes 1.5 GB at a time with an fsync to the data
# directory's disk, again and again while each open-loop rate runs (60 s and 30 passes at
# most), on the load's CPU (WRITER_CPU, default 1) so that it slows the server through the
# disk, not by taking its core: the stall scenario of issue 13. The writer runs under SCHED_IDLE
# so that it yields its CPU to the load tool (WRITER_SCHED=other: at nice 0).
# The binaries take turns at running first (`binaries_in_order`). Prints one line per
# measurement, then the medians and in how many rounds the new binary (the second
# argument) was the cheaper.
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
rates=${RATES:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"
text_scenario "$work/text.toml" "${FRESH:+fresh}" "${WORKFLOW:-default}"

writer() { # bulk writes with fsyncs on the data directory's disk, bounded in size and time
  ( end=$((SECONDS + 60))
    for _ in $(seq 30); do
      [ "$SECONDS" -lt "$end" ] || break
      # Under SCHED_IDLE (WRITER_SCHED=other for the old behaviour): at nice 0 on the
      # load's CPU, dd's kernel copying held that CPU for up to 17 ms at a time (this kernel
      # is PREEMPT_NONE, HZ=250), the load tool could not send, and its open-loop clock
      # charged the wait to the server (`perf record -e sched:sched_switch -a`, 2026-11-26:
      # the shard thread never entered D state in 18 s beside the writer).
      timeout 60 taskset -c "${WRITER_CPU:-1}" chrt "--${WRITER_SCHED:-idle}" 0 \
        dd if=/dev/zero of="$work/bulk" bs=1M count=1536 conv=fsync status=none || true
      rm -f "$work/bulk"
    done ) &
  writer_pid=$!
}

run() { # ARGS... -> "us=.. p50=.. p99=.. max=.."
  "$load" --scenario "$work/text.toml" --server "http://127.0.0.1:$port" --key "$key" \
    --cpu 1 --quiet --warmup 3s --server-pid "$pid" --json "$work/r.json" "$@" >/dev/null
  python3 - "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency"]
ok = r["statuses"].get("200", 0)
print(f"us={r['server_cpu_us_per_answer']:.1f} p50={l['p50_us']/1000:.2f} p99={l['p99_us']/1000:.2f} max={l['max_us']/1000:.2f} answered={r['completed']} ok={ok} throughput={r['throughput_per_s']:.0f}")
PY
}

results="$work/results"
for round in $(seq "$rounds"); do
  for name in $(binaries_in_order "$round"); do
    bin=$before; [ "$name" = after ] && bin=$after
    start_server "$bin" "$name-$round" ${FRESH:+defaults}
    for rate in $rates; do
      [ -n "${DISK_WRITER:-}" ] && writer
      line=$(run --rate "$rate" --duration 20s)
      [ -n "${DISK_WRITER:-}" ] && { kill "$writer_pid" 2>/dev/null || true; pkill -f "of=$work/bulk" || true; wait "$writer_pid" 2>/dev/null || true; rm -f "$work/bulk"; }
      echo "round=$round binary=$name load=rate$rate $line" | tee -a "$results"
    done
    line=$(run --connections 32 --duration 10s)
    echo "round=$round binary=$name load=saturated $line" | tee -a "$results"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split())
    rows.setdefault((f["load"], f["binary"]), []).append(f)
print("\nmedians (µs of server CPU per answer; latency in ms)")
for (load, binary), fs in sorted(rows.items()):
    med = lambda k: statistics.median(float(x[k]) for x in fs if x[k] not in ('None',))
    print(f"{load:>10} {binary:>6}: cpu {med('us'):7.1f} µs  p50 {med('p50'):.2f}  p99 {med('p99'):.2f}  max {med('max'):.2f}")
PY
rounds_lower "$results" load us
