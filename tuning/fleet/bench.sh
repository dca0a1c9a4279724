#!/usr/bin/env bash
# Server CPU per text check, fleet node against single node, in one pass (interleaved rounds so
# the machine's noise falls on both alike); Redis and quota-ledger round trips per 1,000 checks
# at steady state; journal shipping into PostgreSQL (records per second, and PostgreSQL's CPU
# per record).
#
#   tuning/fleet/bench.sh [MODGATE_BINARY] [ROUNDS]   (default: target/release/modgate, 3;
#                                                      0: the shipping catch-up alone)
#
# NODE_CORES=N (default 1) starts the nodes with N shards on CPUs 0..N-1; with ROUNDS 0 the
# catch-up then ships from N shards, and PostgreSQL, restarted for it, runs unpinned at normal
# priority (one backend per shipping connection, on any CPU).
#
# The server runs one shard on CPU 0, wrk on CPU 1 (`cpu-per-request --pin-wrk 1`); PostgreSQL
# and Redis (Debian's packages) run on loopback in a temporary directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/target/release/modgate}
rounds=${2:-3}
# Also measure at this fixed rate (checks/s; 0: only at saturation).
rate=${BENCH_RATE:-8000}
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
tool=${CPU_PER_REQUEST:-$root/../shared/tools/cpu-per-request}
port=${PGPORT:-55449}
redis_port=${REDIS_PORT:-56389}
work_prefix=modgate-fleet-bench
engine_cpu=1
# The engines share CPU 1 with wrk. At an equal footing, PostgreSQL's inserts of the shipped
# journal took 40 % of CPU 1 from wrk, so the fleet node got less load than the single node
# (16,000 against 20,000 checks/s), and a less loaded shard costs more per check (fewer
# requests a wake-up): the ratio measured the load generator, not the node. So the engines run
# under SCHED_IDLE, on what wrk leaves (on a fleet they have hosts of their own; their CPU is
# not the node's and is not counted). ENGINE_IDLE= (empty) runs them as before.
engine_idle=${ENGINE_IDLE-1}
. "$root/tuning/fleet/engines.sh"
. "$root/tuning/lib.sh"
python3 -c "
import json
text = open('$root/tuning/text_1k.txt').read()[:1024]
open('$work/text.json','w').write(json.dumps({'text': text}))
open('$work/text.toml','w').write('name = \"fleet-bench\"\nworkflow = \"default\"\n[[requests]]\nname = \"text-1k\"\nkind = \"text\"\nweight = 1\ntext = ' + json.dumps(text) + '\n')
"
cat > "$work/fleet.toml" <<TOML
[cluster]
node_id = "bench"
postgres_url = "postgres://modgate@127.0.0.1:$port/modgate"
${BENCH_NO_REDIS:+#}redis_url = "redis://127.0.0.1:$redis_port/0"
TOML
"$bin" db migrate --config "$work/fleet.toml" >/dev/null
# Limits far above what one core answers, concurrency too (`bench_key`): at 8,000 checks/s a
# hiccup of 20 ms puts more than the plan's 128 checks in progress, and the cheap 429s that
# followed counted as answers in the CPU per answer (0.2 to 2.6 % of them in four runs of
# 2026-11-27, most on the fleet node, when this script set the limits itself).
fleet_key=$(bench_key "$bin" --config "$work/fleet.toml")

node_cores=${NODE_CORES:-1}
node_cpus=0-$((node_cores - 1))
start() { # NAME [--config FILE] -> sets pid, url, metrics
  local name=$1; shift
  taskset -c "$node_cpus" "$bin" serve --data "$work/data-$name" --listen 127.0.0.1:0 --cores "$node_cores" \
    --models "$root/models" --metrics-listen 127.0.0.1:0 --log-level warn "$@" >"$work/$name.out" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    url=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$name.out" | head -1 | grep -o 'http.*' || true)
    metrics=$(grep -o 'metrics on http://127.0.0.1:[0-9]*' "$work/$name.out" | head -1 | grep -o 'http.*' || true)
    if [ -n "$url" ] && curl -sf "$url/health" >/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$name did not start:" >&2; cat "$work/$name.out" >&2; exit 1
}
start single; single_pid=$pid single_url=$url
single_key=$(bench_key "$bin" --data "$work/data-single")
start fleet --config "$work/fleet.toml"; fleet_pid=$pid fleet_url=$url fleet_metrics=$metrics

measure() { # PID URL KEY -> the tool's report on stderr, CPU microseconds per request on stdout
  "$tool" --pid "$1" --url "$2/v1/text" --method POST --body-file "$work/text.json" \
    -H "Content-Type: application/json" -H "X-Api-Key: $3" --pin-wrk 1 --seconds 10 >"$work/measure.out"
  sed 's/^/    /' "$work/measure.out" >&2
  if ! grep -q 'non2xx=0 ' "$work/measure.out"; then
    echo "answers other than 200 under wrk: the figure would not be a check's cost" >&2
    exit 1
  fi
  grep -o 'us_per_request=[0-9.]*' "$work/measure.out" | head -1 | cut -d= -f2
}
# The same text at a fixed rate that both nodes sustain (the load tool, open loop): the same
# load for both, so the ratio does not depend on how much each got from a saturating client.
# Every answer must be a check's: an error (a 429, a 503) is cheaper and would lower the figure.
measure_at_rate() { # PID URL KEY -> CPU microseconds per answer on stdout
  "$load" --scenario "$work/text.toml" --server "$2" --key "$3" --rate "$rate" --duration 10s \
    --cpu 1 --server-pid "$1" --quiet >"$work/load.out" 2>&1
  grep -E '^(sent|server CPU|answers|error types)' "$work/load.out" | sed 's/^/    /' >&2
  if ! grep -q '^sent .* errors 0 ' "$work/load.out"; then
    echo "answers other than 200 at $rate/s: the figure would not be a check's cost" >&2
    exit 1
  fi
  grep -o 'server CPU *[0-9.]*' "$work/load.out" | grep -o '[0-9.]*$'
}
metric() { curl -s "$fleet_metrics/metrics" | awk -v m="$1" '$1 == m {v = $2} END {print v + 0}'; }
checks() { curl -s "$fleet_metrics/metrics" | awk '/^modgate_requests_total\{route="\/v1\/text",status="200"\}/ {v = $2} END {print v + 0}'; }

per_1000() { python3 -c "print(round(1000 * ($2 - $1) / max(1, $4 - $3), 2))"; }
for round in $(seq "$rounds"); do
  if [ -n "${BENCH_PERF:-}" ]; then
    perf record -F 999 -g -p "$single_pid" -o "$BENCH_PERF.single" -- sleep 8 >/dev/null 2>&1 &
  fi
  s=$(measure "$single_pid" "$single_url" "$single_key")
  redis0=$(metric modgate_budget_engine_round_trips_total)
  ledger0=$(metric modgate_quota_ledger_round_trips_total); checks0=$(checks)
  if [ -n "${BENCH_PERF:-}" ]; then
    perf record -F 999 -g -p "$fleet_pid" -o "$BENCH_PERF" -- sleep 8 >/dev/null 2>&1 &
  fi
  if [ -n "${BENCH_MONITOR:-}" ]; then
    (sleep 4; timeout 1 redis-cli -p "$redis_port" monitor >"$BENCH_MONITOR" 2>&1) &
  fi
  f=$(measure "$fleet_pid" "$fleet_url" "$fleet_key")
  redis1=$(metric modgate_budget_engine_round_trips_total)
  ledger1=$(metric modgate_quota_ledger_round_trips_total); checks1=$(checks)
  if [ "$rate" != 0 ]; then
    sr=$(measure_at_rate "$single_pid" "$single_url" "$single_key")
    fr=$(measure_at_rate "$fleet_pid" "$fleet_url" "$fleet_key")
    echo "round $round at $rate/s: single $sr us, fleet $fr us (ratio $(python3 -c "print(round($fr / $sr, 3))"))"
  fi
  echo "round $round: single $s us, fleet $f us (ratio $(python3 -c "print(round($f / $s, 3))")); per 1000 checks: Redis $(per_1000 "$redis0" "$redis1" "$checks0" "$checks1") round trips, quota ledger $(per_1000 "$ledger0" "$ledger1" "$checks0" "$checks1")"
done

# Shipping: stop the fleet node's shipping target, load, then time the catch-up.
shipped() { "$pgbin/psql" -h 127.0.0.1 -p "$port" -U modgate -d modgate -At -c "SELECT count(*) FROM journal"; }
as_pg "$pgbin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null
# Records the fleet node has committed and not shipped, over all its shards.
unshipped() { curl -s "$fleet_metrics/metrics" | awk '/^modgate_journal_unshipped_records/ {s += $2} END {print s + 0}'; }
before=$(unshipped)
wrk -t1 -c8 -d10s -s /dev/stdin "$fleet_url/v1/text" >/dev/null <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Api-Key"] = "$fleet_key"
wrk.body = '{"text":"hello there"}'
LUA
backlog=$(unshipped)
# PostgreSQL's CPU (every process of its user, in clock ticks) across the catch-up.
pg_ticks() {
  local ticks=0 pid stat
  for pid in $(pgrep -u postgres); do
    read -r -a stat <"/proc/$pid/stat" 2>/dev/null || continue # gone since pgrep
    ticks=$((ticks + stat[13] + stat[14]))
  done
  echo "$ticks"
}
if [ "$node_cores" != 1 ]; then engine_cpu='' engine_idle=''; fi
start_count=$(pg_start; shipped)
ticks0=$(pg_ticks)
t0=$(date +%s.%N)
while [ "$(unshipped)" != 0 ]; do sleep 0.05; done
t1=$(date +%s.%N)
ticks1=$(pg_ticks)
end_count=$(shipped)
python3 -c "
n = $end_count - $start_count
t = $t1 - $t0
cpu = ($ticks1 - $ticks0) / $(getconf CLK_TCK)
print(f'shipping: {n} records (backlog {$backlog - $before}) in {t:.2f} s after PostgreSQL came back: {n / t:.0f} records/s, PostgreSQL CPU {1e6 * cpu / max(n, 1):.1f} us per record')
"
