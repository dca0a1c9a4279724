# Shared by tuning/rate_cpu.sh and tuning/fairness.sh (sourced, after they set `root` and
# `work`): a server to measure and the 1 KiB text scenario they load it with.

# start_server BIN NAME: one shard on CPU 0, a fresh data directory under $work, limits far
# above what one core answers (every answer a check, never a 429); sets pid, port and key.
start_server() {
  local bin=$1 name=$2 data="$work/data-$2"
  taskset -c 0 "$bin" serve --data "$data" --listen 127.0.0.1:0 --cores 1 \
    --models "$root/models" --metrics-listen off --log-level warn >"$work/$name.out" 2>&1 &
  pid=$!
  for _ in $(seq 150); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$name.out" | grep -o '[0-9]*$' || true)
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
      "$bin" org create bench --plan pro --data "$data" >/dev/null
      "$bin" org set-limits bench --rate-per-s 1000000 --rate-burst 1000000 \
        --concurrent-max 100000 --quota-per-month 1000000000 --data "$data" >/dev/null
      key=$("$bin" key create --org bench --data "$data" | head -1)
      return 0
    fi
    sleep 0.2
  done
  echo "server $name did not start" >&2; cat "$work/$name.out" >&2; exit 1
}

# text_scenario FILE: a modgate-load scenario of 1 KiB texts (tuning/text_1k.txt, the text every
# tuning script sends) on the default workflow.
text_scenario() {
  python3 - "$1" "$root/tuning/text_1k.txt" <<'PY'
import sys
text = open(sys.argv[2]).read()[:1024]
open(sys.argv[1], 'w').write(f'''name = "text-1k"
description = "POST /v1/text, 1 KiB, workflow default"
workflow = "default"
[[requests]]
name = "text-1k"
kind = "text"
weight = 1
text = "{text}"
''')
PY
}
