#!/usr/bin/env bash
# A fleet on loopback to try: PostgreSQL (Debian's package, run as its own user) and Redis
# (Debian's redis-server) in a temporary directory, the schema migrated, and three nodes on
# 127.0.0.1:8081-8083 sharing them.
#
#   tuning/fleet/try.sh [MODGATE_BINARY]     (default: target/release/modgate; build it first)
#
# Prints the admin commands to try; Ctrl-C stops everything and removes the directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/target/release/modgate}
port=${PGPORT:-55439}
redis_port=${REDIS_PORT:-56379}
work_prefix=modgate-fleet
. "$root/tuning/fleet/engines.sh"
for node in a b c; do
  cat > "$work/$node.toml" <<TOML
[cluster]
node_id = "node-$node"
postgres_url = "postgres://modgate@127.0.0.1:$port/modgate"
redis_url = "redis://127.0.0.1:$redis_port/0"
TOML
done
"$bin" db migrate --config "$work/a.toml"
i=1
for node in a b c; do
  "$bin" serve --config "$work/$node.toml" --data "$work/data-$node" --listen "127.0.0.1:808$i" \
    --cores 1 --models "$root/models" --metrics-listen "127.0.0.1:946$i" >"$work/$node.log" 2>&1 &
  i=$((i + 1))
done
sleep 3
"$bin" fleet status --config "$work/a.toml"
cat <<TEXT

Three nodes on 127.0.0.1:8081, :8082 and :8083 follow postgres://127.0.0.1:$port/modgate
and share their rate and concurrency budgets in redis://127.0.0.1:$redis_port.
  $bin org create acme --plan pro --config $work/a.toml
  $bin key create --org acme --config $work/a.toml
  curl -H "X-Api-Key: KEY" http://127.0.0.1:8082/v1/workflows
  $bin key revoke KEYID --config $work/a.toml
  $bin fleet status --config $work/a.toml
Logs: $work/{a,b,c}.log. Ctrl-C stops it all.
TEXT
wait
