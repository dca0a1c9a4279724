# Shared by the tuning scripts (sourced, after they set `root` and `work`): the servers to
# measure and the 1 KiB text scenario they load them with.

# bench_key BIN STORE_ARGS...: the organization `bench`, with limits far above what one core
# answers (rate, checks in progress, quota: every answer a check, never a 429), and a key of it,
# printed. STORE_ARGS name the store (`--data DIR` or `--config FILE`); the server must have
# started on it once (it writes the plans).
bench_key() {
  local bin=$1; shift
  "$bin" org create bench --plan pro "$@" >/dev/null
  "$bin" org set-limits bench --rate-per-s 1000000 --rate-burst 1000000 \
    --concurrent-max 100000 --quota-per-month 1000000000 "$@" >/dev/null
  "$bin" key create --org bench "$@" | head -1
}

# models_config BIN: the `--config FILE` arguments that make BIN run the models for every
# check, for a build that keeps results for repeats (`inference.image_results_kept` and
# `inference.toxblock_windows_kept`, on by default): the scripts send one file or text again and
# again, and must measure the models, not the reuse. Only the fields BIN knows: older builds
# refuse the others (and get no arguments when they know neither).
models_config() {
  local fields
  fields=$("$1" config --print-defaults 2>/dev/null |
    grep -o '^\(image_results_kept\|toxblock_windows_kept\)' | sort -u || true)
  if [ -n "$fields" ]; then
    { echo '[inference]'; for field in $fields; do echo "$field = 0"; done; } >"$work/models.toml"
    echo "--config $work/models.toml"
  fi
}

# start_server BIN NAME [defaults]: one shard on CPU 0, a fresh data directory under $work, and
# a key of `bench_key`; sets pid, port and key. Results kept for repeats are off
# (`models_config`) unless the third argument is `defaults`.
start_server() {
  local bin=$1 name=$2 data="$work/data-$2" config=
  [ "${3:-}" = defaults ] || config=$(models_config "$bin")
  # shellcheck disable=SC2086 # $config is zero or two words
  taskset -c 0 "$bin" serve --data "$data" $config --listen 127.0.0.1:0 \
    --cores 1 --models "$root/models" --metrics-listen off --log-level warn \
    >"$work/$name.out" 2>&1 &
  pid=$!
  for _ in $(seq 150); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$name.out" | grep -o '[0-9]*$' || true)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
      key=$(bench_key "$bin" --data "$data")
      return 0
    fi
    sleep 0.2
  done
  echo "server $name did not start" >&2; cat "$work/$name.out" >&2; exit 1
}

# text_scenario FILE [fresh] [WORKFLOW]: a modgate-load scenario of 1 KiB texts
# (tuning/text_1k.txt, the text every tuning script sends) on WORKFLOW (default: `default`);
# with `fresh`, each text sent carries a new stamp of words (modgate-load's `fresh`), for
# servers that keep results for repeats.
text_scenario() {
  python3 - "$1" "$root/tuning/text_1k.txt" "${2:-}" "${3:-default}" <<'PY'
import sys
text = open(sys.argv[2]).read()[:1024]
fresh = "fresh = true\n" if sys.argv[3] == "fresh" else ""
workflow = sys.argv[4]
open(sys.argv[1], 'w').write(f'''name = "text-1k"
description = "POST /v1/text, 1 KiB, workflow {workflow}"
workflow = "{workflow}"
[[requests]]
name = "text-1k"
kind = "text"
weight = 1
text = "{text}"
{fresh}''')
PY
}

# start_baseline BIN: the raw tokio + httparse server (`modgate-baseline`) on CPU 0; sets pid and
# url.
start_baseline() {
  taskset -c 0 "$1" 127.0.0.1:0 >"$work/baseline.out" 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/baseline.out" || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "the baseline server did not start" >&2; cat "$work/baseline.out" >&2; exit 1
}

# binaries_in_order ROUND: "before after" in odd rounds, "after before" in even ones. The
# comparison scripts take their two binaries in this order, so that neither always runs first
# (after a quiet spell, say, or into the same page cache) and a drift of the machine during a
# pass falls on both alike.
binaries_in_order() {
  if [ $(($1 % 2)) -eq 1 ]; then echo "before after"; else echo "after before"; fi
}

# rounds_lower RESULTS KEY FIELD: for each value of KEY (a route, a load), in how many rounds
# the `after` binary's FIELD was below the `before` binary's, from lines of `round=R
# binary=before|after KEY=.. FIELD=..`. The medians of two identical binaries were 12 % apart
# at 1,000 texts/s (tuning/README.md), so a median alone says little: this says how often.
rounds_lower() {
  python3 - "$@" <<'PY'
import sys
results, key, field = sys.argv[1:4]
by = {}
for line in open(results):
    f = dict(kv.split("=", 1) for kv in line.split())
    if f.get(field) in (None, "None"):
        continue
    by.setdefault(f[key], {}).setdefault(f["round"], {})[f["binary"]] = float(f[field])
for name, rounds in by.items():
    pairs = [r for r in rounds.values() if "before" in r and "after" in r]
    lower = sum(r["after"] < r["before"] for r in pairs)
    print(f"{name:>10}: after lower in {lower} of {len(pairs)} rounds")
PY
}
