#!/usr/bin/env bash
# User CPU time per call of one text check's own code, warm, in several builds: the least of
# ROUNDS runs of each build, the builds interleaved so that this machine's noise falls on all
# alike. Where callgrind (tuning/instructions.sh) counts instructions, this sees the stalls
# (mispredicted branches, reads waiting on stores) that instructions do not show. Build each
# side's counter with
#   cargo build --release --example text_instructions && cp target/release/examples/text_instructions OUT
#
#   tuning/warm_time.sh PART CALLS ROUNDS BIN...
#   tuning/warm_time.sh langid 200000 6 OLD NEW
#
# Parts: those of tuning/instructions.sh. Each run is pinned to CPU 0.
set -euo pipefail
part=$1 calls=$2 rounds=$3
shift 3
declare -A best
for _ in $(seq "$rounds"); do
  for bin in "$@"; do
    seconds=$({ /usr/bin/time -f %U taskset -c 0 "$bin" "$part" "$calls" >/dev/null; } 2>&1 | tail -1)
    if [ -z "${best[$bin]:-}" ] || awk "BEGIN { exit !($seconds < ${best[$bin]}) }"; then
      best[$bin]=$seconds
    fi
  done
done
for bin in "$@"; do
  awk -v bin="$bin" -v s="${best[$bin]}" -v calls="$calls" \
    'BEGIN { printf "%-40s %6.3f us per call (%s s for %d calls)\n", bin, s * 1e6 / calls, s, calls }'
done
