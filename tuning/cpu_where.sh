#!/usr/bin/env bash
# Where one shard's CPU goes under 1 KiB texts at an open-loop rate and at saturation: the share
# of its samples in each system call (the answer's send, the request's recv, io_uring_enter
# where the shard sleeps and wakes, fdatasync), in interrupts, and in user space, with the
# server CPU per answer that modgate-load measured alongside. The shard serves on CPU 0, the
# load runs on CPU 1. Needs `perf`; perf's sampling adds its own cost to the figures, so compare
# the shares, or two binaries in the same pass.
#
#   tuning/cpu_where.sh [BINARY] [RATE]     (default: target/release/modgate, 1000)
#
# Found with it (2026-11-29, a 2-vCPU virtual machine, two runs): at 1,000 texts/s 241 and 245 us per answer
# against 43 and 38 saturated. The answer's send 64 and 98 us against 9 and 7 (73 and 86 % of
# its samples where interrupts come back on: waking the load tool on the other CPU takes its
# runqueue's lock and sends an IPI, costly in a VM; a client on another host is woken by its
# own NIC), user space 114 and 88 us against 31 and 29 (the checks' tables are cold after each
# sleep), io_uring_enter 41 and 31 us against 0.8 and 0.7 (sleeping and waking).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/modgate}
rate=${2:-1000}
load=${MODGATE_LOAD:-$root/target/release/modgate-load}
work=$(mktemp -d -p "${WORK_DIR:-/var/tmp}")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
. "$root/tuning/lib.sh"
text_scenario "$work/text.toml"

profile() { # NAME LOAD_ARGS...: profiles the shard for 8 s of a 15 s run, prints the shares
  local name=$1; shift
  start_server "$bin" "$name"
  "$load" --scenario "$work/text.toml" --server "http://127.0.0.1:$port" --key "$key" \
    --cpu 1 --quiet --warmup 3s --duration 15s --server-pid "$pid" --json "$work/r.json" \
    "$@" >/dev/null &
  local load_pid=$!
  sleep 6
  perf record -F 2999 -g -p "$pid" -o "$work/$name.data" -- sleep 8 >/dev/null 2>&1
  wait "$load_pid"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local us
  us=$(python3 -c "import json; print(round(json.load(open('$work/r.json'))['server_cpu_us_per_answer'], 1))")
  perf script -i "$work/$name.data" 2>/dev/null | awk -v name="$name" -v us="$us" '
    BEGIN { RS = ""; FS = "\n" }
    {
      total++
      if ($0 ~ /__x64_sys_sendto/) k = "send"
      else if ($0 ~ /__x64_sys_recvfrom/) k = "recv"
      else if ($0 ~ /io_uring_enter/) k = "io_uring_enter"
      else if ($0 ~ /__x64_sys_fdatasync|__x64_sys_fsync/) k = "fdatasync"
      else if ($0 ~ /entry_SYSCALL/) k = "other system calls"
      else if ($0 ~ /asm_sysvec|asm_common_interrupt|__sysvec|irq_exit/) k = "interrupts"
      else if ($2 ~ /kernel/) k = "other kernel"
      else k = "user space"
      share[k]++
      if (k == "send" && $2 ~ /_raw_spin_unlock_irqrestore|kvm_kick_cpu/) woke++
    }
    END {
      printf "%s: %s us of server CPU per answer, %d samples\n", name, us, total
      sorter = "sort -rn"
      for (k in share) {
        printf "  %5.1f %%  %6.1f us  %s\n", 100 * share[k] / total, us * share[k] / total, k | sorter
      }
      close(sorter)
      if (share["send"]) {
        printf "  of the send, %.0f %% where interrupts come back on or in kvm_kick_cpu (waking the reader)\n", 100 * woke / share["send"]
      }
    }'
}

profile "rate$rate" --rate "$rate"
profile saturated --connections 32
