# Sourced by the scripts here: PostgreSQL (Debian's package, run as its own user) and Redis
# (Debian's redis-server) on loopback in a temporary directory, stopped and removed on exit.
#
# In: $work_prefix (the directory's name prefix), $port, $redis_port, optional $engine_cpu
# (the CPU both engines are pinned to) and $engine_idle (1: they run under SCHED_IDLE, on what
# the CPU's other work leaves).
# Out: $pgbin, $work (the directory), as_pg (runs a command as PostgreSQL's user), pg_start.
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort | tail -1)
work=$(mktemp -d "/tmp/$work_prefix-XXXXXX")
as_pg() { if [ "$(id -u)" = 0 ]; then chown -R postgres "$work"; runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  as_pg ${engine_cpu:+taskset -c "$engine_cpu"} ${engine_idle:+chrt --idle 0} "$pgbin/pg_ctl" -D "$work/pg" -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$work" -l "$work/pg.log" -w start >/dev/null
}
cleanup() {
  trap - EXIT INT TERM
  kill $(jobs -p) 2>/dev/null || true
  as_pg "$pgbin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
as_pg "$pgbin/initdb" -D "$work/pg" -A trust -U modgate --no-sync >/dev/null
pg_start
"$pgbin/createdb" -h 127.0.0.1 -p "$port" -U modgate modgate
${engine_cpu:+taskset -c "$engine_cpu"} ${engine_idle:+chrt --idle 0} redis-server --port "$redis_port" --bind 127.0.0.1 --save "" \
  --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
