#!/usr/bin/env bash
# `modgate calibrate` and `modgate replay` over a journal of CHECKS real checks (default one
# million) with LABELS of them labelled (default 10,000): a release server on the `fast`
# workflow is loaded with fresh 1 KiB texts (modgate-load, closed loop) until its journal holds
# CHECKS, LABELS evenly spaced checks get a profanity label (their score over 0.5, one in ten
# flipped, seeded) through `modgate feedback import`, then each command is timed RUNS times
# (default 3) on the stopped server's data directory, as wall time and CPU time.
#
#   cargo build --release --workspace && tuning/judgement.sh
#
# Prints one line per run: `command=calibrate run=1 wall_s=.. cpu_s=.. max_rss_kb=..`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-$(mktemp -d)}
checks=${CHECKS:-1000000}
labels=${LABELS:-10000}
runs=${RUNS:-3}
# shellcheck source=tuning/lib.sh
source "$root/tuning/lib.sh"
bin=$root/target/release/modgate
load=$root/target/release/modgate-load

start_server "$bin" judged
data="$work/data-judged"
text_scenario "$work/fast.toml" fresh fast
answered=0
while [ "$answered" -lt "$checks" ]; do
  "$load" --scenario "$work/fast.toml" --server "http://127.0.0.1:$port" --key "$key" \
    --connections 32 --duration 60s --warmup 0s --cpu 1 --quiet --json "$work/load.json" \
    >/dev/null
  answered=$((answered + $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["completed"])' "$work/load.json")))
  echo "checks answered so far: $answered" >&2
done
kill "$pid"; wait "$pid" 2>/dev/null || true

# Labels: every (journal / LABELS)-th check of the workflow.
"$bin" journal --json --data "$data" 2>/dev/null | python3 -c '
import json, random, sys
labels = int(sys.argv[1])
rows = []
for line in sys.stdin:
    record = json.loads(line)
    if record.get("workflow") == "fast" and record.get("action"):
        score = dict(record["scores"]).get("profanity")
        if score is not None:
            rows.append((record["request_id"], score))
step = max(1, len(rows) // labels)
chosen = rows[::step][:labels]
rng = random.Random(20261208)
with open(sys.argv[2], "w") as out:
    out.write("request_id,label,value\n")
    for request_id, score in chosen:
        label = (score >= 0.5) != (rng.random() < 0.1)
        out.write(f"{request_id},profanity,{str(label).lower()}\n")
print(f"{len(rows)} checks of fast in the journal, {len(chosen)} labelled", file=sys.stderr)
' "$labels" "$work/labels.csv"
"$bin" feedback import "$work/labels.csv" --org bench --data "$data" >&2

timed() {
  local name=$1 run=$2; shift 2
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >"$work/$name.out"
  read -r wall user sys rss <"$work/time"
  echo "command=$name run=$run wall_s=$wall cpu_s=$(echo "$user + $sys" | bc) max_rss_kb=$rss"
}
for run in $(seq "$runs"); do
  timed calibrate "$run" "$bin" calibrate --workflow fast --org bench --json \
    --write "$work/suggested.toml" --data "$data"
  timed replay "$run" "$bin" replay --workflow fast --org bench \
    --thresholds "$work/suggested.toml" --json --data "$data"
done
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("calibrate read", r["checks"], "checks,", r["with_feedback"], "with feedback")' "$work/calibrate.out"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("replay read", r["checks"], "checks,", r["flipped"], "flip")' "$work/replay.out"
