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
set -euo pipefail
before=$1 after=$2
shift 2
parts=${*:-normalize wordlist profanity_svm pii langid langid_short default}
calls=${CALLS:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() { # BIN PART -> instructions per call
  valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect='*measured*' \
    "$1" "$2" "$calls" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  grep -o 'Collected : [0-9]*' "$work/err" | grep -o '[0-9]*$' | awk -v n="$calls" '{print int($1 / n)}'
}
printf '%-14s %12s %12s %7s\n' part before after ratio
for part in $parts; do
  old=$(count "$before" "$part") new=$(count "$after" "$part")
  printf '%-14s %12d %12d %7.3f\n' "$part" "$old" "$new" "$(echo "$new / $old" | bc -l)"
done
