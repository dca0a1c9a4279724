#!/usr/bin/env bash
# Chaos under load (issue 14): while modgate-load sends text checks at a fixed rate, the server
# is killed with SIGKILL and restarted, its disk fills up and is freed, and `url` checks hit a
# name server that never answers. Then it compares what the load tool was answered with what
# the journal holds, by route and status, and says what each phase did.
#
#   tuning/chaos.sh [BIN_DIR]     (default target/release; cargo build --release --workspace)
#
# Needs root (the data directory is a small tmpfs, so "disk full" is a real ENOSPC) and
# python3. Knobs: CHAOS_RATE (texts/s, default 400), CHAOS_PHASE_S (seconds per phase,
# default 8), CHAOS_PORT (default 18090), CHAOS_CPU_SERVER / CHAOS_CPU_LOAD (default 0 / 1).
#
# What must hold: every check answered 200 is in the journal (answered-but-not-journaled is 0);
# the journal may hold a few more than were answered (checks cut off by the kill after their
# commit); while the disk is full checks get 503 `busy` with Retry-After and /health is 503;
# texts keep being answered while the name lookups hang, and no url check takes past 11 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/target/release}" && pwd)
rate=${CHAOS_RATE:-400}
phase=${CHAOS_PHASE_S:-8}
port=${CHAOS_PORT:-18090}
cpu_server=${CHAOS_CPU_SERVER:-0}
cpu_load=${CHAOS_CPU_LOAD:-1}
[ "$(id -u)" = 0 ] || { echo "chaos.sh: needs root (tmpfs for the disk-full phase)" >&2; exit 2; }

work=$(mktemp -d /tmp/modgate-chaos-XXXXXX)
data=$work/data
mkdir -p "$data"
mount -t tmpfs -o size=64m modgate-chaos "$data"
server_pid=
dns_pid=
cleanup() {
  trap - EXIT INT TERM
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "$dns_pid" ] && kill "$dns_pid" 2>/dev/null || true
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  umount "$data" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# A name server that reads nothing and answers nothing.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
time.sleep(1e9)' >"$work/dns.port" &
dns_pid=$!
for _ in $(seq 50); do [ -s "$work/dns.port" ] && break; sleep 0.1; done
dns_port=$(cat "$work/dns.port")

sed -e "s|^listen = .*|listen = \"127.0.0.1:$port\"|" -e "s|^data_dir = .*|data_dir = \"$data\"|" \
  -e "/^\[metrics\]/,/^$/d" -e "/^\[testing\]/,\$d" "$root/tuning/profiles/loadtest.toml" >"$work/chaos.toml"
cat >>"$work/chaos.toml" <<TOML
[testing]
dns_servers = ["127.0.0.1:$dns_port"]
TOML

start_server() {
  taskset -c "$cpu_server" "$bin/modgate" serve --config "$work/chaos.toml" --cores 1 \
    --models "$root/models" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "chaos.sh: the server did not start; its log:" >&2
  tail -20 "$work/server.log" >&2
  exit 1
}
health() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true; }
now() { date +%s.%N; }

start_server
key=$("$bin/modgate" key create --org demo --data "$data" | head -1)
"$bin/modgate" org set-plan demo pro --data "$data" >/dev/null

duration=$((4 * phase))
echo "chaos: $rate texts/s for ${duration} s; phases of ${phase} s: kill -9, disk full, slow DNS, calm"
taskset -c "$cpu_load" "$bin/modgate-load" --server "http://127.0.0.1:$port" --key "$key" \
  --scenario default-text --rate "$rate" --duration "${duration}s" --warmup 0s --quiet \
  --json "$work/load.json" >"$work/load.txt" 2>&1 &
load_pid=$!
t0=$(now)

# Phase 1: kill -9 in the middle of the phase, restart at once.
sleep $((phase / 2))
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
killed_at=$(now)
start_server
restarted_in=$(python3 -c "print(f'{$(now) - $killed_at:.2f}')")
echo "phase 1: killed with SIGKILL, serving again after ${restarted_in} s"
sleep $((phase - phase / 2))

# Phase 2: fill the disk, hold it full, free it.
fallocate -l 60M "$data/filler" 2>/dev/null || dd if=/dev/zero of="$data/filler" bs=1M count=64 2>/dev/null || true
dd if=/dev/zero of="$data/filler2" bs=64k 2>/dev/null || true
sleep $((phase / 2))
health_full=$(health)
rm -f "$data/filler" "$data/filler2"
recovered=
for i in $(seq 100); do
  if [ "$(health)" = 200 ]; then recovered=$((i * 100)); break; fi
  sleep 0.1
done
echo "phase 2: disk full for $((phase / 2)) s: /health $health_full while full, 200 again ${recovered:-never} ms after it was freed"
sleep $((phase - phase / 2))

# Phase 3: 24 url checks whose names never resolve, beside the texts.
for n in $(seq 24); do
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST -H "X-Api-Key: $key" \
    "http://127.0.0.1:$port/v1/image?url=http%3A%2F%2Fhost$n.blackhole.test%2Fa.png" >>"$work/url.txt" &
done
sleep "$phase"
wait $(jobs -p | grep -v "^$load_pid$" | grep -v "^$dns_pid$" | grep -v "^$server_pid$") 2>/dev/null || true
echo "phase 3: url checks on names that never resolve: $(sort "$work/url.txt" | awk '{print $1}' | uniq -c | awk '{printf "%s x %s  ", $2, $1}')slowest $(sort -k2 -n "$work/url.txt" | tail -1 | awk '{print $2}') s"

# Phase 4: calm, then the end of the load.
wait "$load_pid" || true
sleep 1
"$bin/modgate" journal --json --data "$data" >"$work/journal.jsonl"

python3 - "$work/load.json" "$work/journal.jsonl" "$phase" <<'PY'
import json, sys
from collections import Counter
report = json.load(open(sys.argv[1]))
phase = int(sys.argv[3])
journal = Counter()
for line in open(sys.argv[2]):
    record = json.loads(line)
    journal[(record["route"], record["status"])] += 1
answered = Counter()
for route, statuses in report["by_route_status"].items():
    for status, n in statuses.items():
        answered[(route, int(status))] += n
latency = report["latency"]
print(f"load: sent {report['sent']}, answered {report['completed']}, without an answer "
      f"{report['sent'] - report['completed']}; p99 {latency['p99_us'] / 1000:.1f} ms, "
      f"max {latency['max_us'] / 1000:.1f} ms")
print(f"error types: {dict(report['error_types'])}")
names = ["kill -9", "disk full", "slow DNS", "calm"]
for n, name in enumerate(names):
    ticks = [t for t in report["timeline"] if n * phase < t["t_s"] <= (n + 1) * phase]
    if ticks:
        print(f"  phase {n + 1} ({name}): answered {sum(t['completed'] for t in ticks)}, "
              f"errors {sum(t['errors'] for t in ticks)}, worst second p99 "
              f"{max(t['p99_us'] for t in ticks) / 1000:.1f} ms, max {max(t['max_us'] for t in ticks) / 1000:.1f} ms")
print(f"{'route':<12} {'status':>6} {'answered':>9} {'journaled':>10}")
for key in sorted(set(answered) | set(journal)):
    if key[0] == "/health":
        continue
    print(f"{key[0]:<12} {key[1]:>6} {answered[key]:>9} {journal[key]:>10}")
a200 = answered[("/v1/text", 200)]
j200 = journal[("/v1/text", 200)]
lost = max(0, a200 - j200)
print(f"answered 200: {a200}; journaled 200: {j200}; answered but not journaled: {lost}; "
      f"journaled but not answered (cut off by the kill): {max(0, j200 - a200)}")
sys.exit(1 if lost else 0)
PY
