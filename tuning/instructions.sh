#!/usr/bin/env bash
# Instructions per call of each text check's own code in two builds, counted by callgrind
# (valgrind): the steady figure on a machine whose wall times are noisy and which has no
# hardware counters. Build each side's counter with
#   cargo build --release --example text_instructions && cp target/release/examples/text_instructions OUT
#
#   tuning/instructions.sh BIN_BEFORE BIN_AFTER [PARTS...]
#
# Parts: normalize wordlist profanity_svm pii langid langid_short default (all by default).
# Each part runs once to warm up, then CALLS times (100) inside `measured`, the only function
# counted; prints instructions per call for each build and their ratio. Needs `valgrind`
# (Debian package).
#
#   COLD=1 tuning/instructions.sh ...   (COLD set and not empty; 0 counts too) cold
#                                       caches: 64 MB written before every call, and
#                                       callgrind's cache simulation counts the data reads
#                                       that miss the last-level cache (DLmr) per call
#                                       instead of instructions (the measure of a check that
#                                       is bound by memory at an ordinary load)
set -euo pipefail
before=$1 after=$2
shift 2
parts=${*:-normalize wordlist profanity_svm pii langid langid_short default}
calls=${CALLS:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cold=${COLD:+1}
count() { # BIN PART -> instructions (or, COLD, last-level data read misses) per call
  if [ -n "$cold" ]; then
    # The last-level cache is given: under this VM valgrind reads it from CPUID as 256 MB
    # direct-mapped, which a 64 MB flood does not empty. 32 MB, 16-way is this host's L3.
    COLD=1 valgrind --tool=callgrind --cache-sim=yes --LL=33554432,16,64 \
      --callgrind-out-file="$work/out" --toggle-collect='*measured*' "$1" "$2" "$calls" \
      >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    # The events line names the columns of the totals line.
    awk -v n="$calls" '/^events:/ {for (i = 2; i <= NF; i++) if ($i == "DLmr") col = i - 1}
      /^totals:/ && col {print int($(col + 1) / n); found = 1}
      END {if (!found) {print "no DLmr total in callgrind'"'"'s output" > "/dev/stderr"; exit 1}}' \
      "$work/out"
  else
    valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect='*measured*' \
      "$1" "$2" "$calls" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    grep -o 'Collected : [0-9]*' "$work/err" | grep -o '[0-9]*$' | awk -v n="$calls" '{print int($1 / n)}'
  fi
}
printf '%-18s %12s %12s %7s\n' "part${cold:+ (LL misses)}" before after ratio
for part in $parts; do
  # Two assignments: a failed count stops the script (in one, only the last status counts).
  old=$(count "$before" "$part")
  new=$(count "$after" "$part")
  printf '%-18s %12d %12d %7.3f\n' "$part" "$old" "$new" "$(echo "$new / $old" | bc -l)"
done
