#!/usr/bin/env bash
# A modgate binary for deployment, optimised with the profile of its own traffic (PGO) on top of
# the `production` profile (link-time optimisation across every crate, one codegen unit).
#
#   tuning/pgo.sh                 -> target/pgo/HOST/production/modgate
#   PGO_SECONDS=30 tuning/pgo.sh  (seconds of traffic per scenario; default 15)
#
# 1. Builds modgate instrumented (`-Cprofile-generate`) under target/pgo-generate.
# 2. Serves with it (`start_server` of tuning/lib.sh: one shard on CPU 0, a fresh data
#    directory, the models of `make fetch`) and sends it what a moderation service answers:
#    the load tool's text, mixed, language and compatible scenarios at saturation, and a few
#    hundred requests of the other routes (workflows list, OpenAI moderations, Perspective
#    analyze, health). Stops it with SIGTERM, which writes the profile as the process exits.
# 3. Merges the profile with the toolchain's own `llvm-profdata` (rustup's `llvm-tools`
#    component, added when missing: its LLVM must be the compiler's) and builds again with
#    `-Cprofile-use`, under target/pgo.
#
# The two builds take their own target directories because RUSTFLAGS rebuild every crate; the
# usual target/release stays as it was. Both name the host as `--target`, so that RUSTFLAGS
# reach modgate and its dependencies but not build scripts and procedural macros (which would
# write profiles of their own while the crates build). What it gains, measured with
# `tuning/cpu_compare.sh` and `tuning/rate_cpu.sh` against the `release` build of the same
# commit: docs/performance.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${PGO_SECONDS:-15}
generate_dir=$root/target/pgo-generate
use_dir=$root/target/pgo
profiles=$generate_dir/profiles
host=$(rustc -vV | sed -n 's/^host: //p')
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

profdata=$(find "$(rustc --print sysroot)" -name llvm-profdata -type f 2>/dev/null | head -1)
if [ -z "$profdata" ]; then
  rustup component add llvm-tools
  profdata=$(find "$(rustc --print sysroot)" -name llvm-profdata -type f | head -1)
fi

echo "pgo: instrumented build" >&2
rm -rf "$profiles"
RUSTFLAGS="-Cprofile-generate=$profiles" CARGO_TARGET_DIR=$generate_dir \
  cargo build --profile production --target "$host" --bin modgate
cargo build --release -p modgate-load
bin=$generate_dir/$host/production/modgate
load=$root/target/release/modgate-load

echo "pgo: training, ${seconds} s per scenario" >&2
. "$root/tuning/lib.sh"
start_server "$bin" train
url=http://127.0.0.1:$port

for scenario in default-text mixed languages compat; do
  "$load" --scenario "loadtest/scenarios/$scenario.toml" --server "$url" --key "$key" \
    --connections 8 --warmup 1s --duration "${seconds}s" --quiet >/dev/null
done
for _ in $(seq 200); do
  curl -sf -o /dev/null -H "Authorization: Bearer $key" "$url/v1/workflows"
  curl -sf -o /dev/null -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"input": "you are a complete idiot and I will find you"}' "$url/v1/moderations"
  curl -sf -o /dev/null -H 'Content-Type: application/json' \
    -d '{"comment": {"text": "what a lovely idea, thank you"}, "requestedAttributes": {"TOXICITY": {}, "INSULT": {}}}' \
    "$url/v1alpha1/comments:analyze?key=$key"
  curl -sf -o /dev/null "$url/health"
done
kill -TERM "$pid"
wait "$pid"

"$profdata" merge -o "$profiles/merged.profdata" "$profiles"
echo "pgo: optimised build" >&2
RUSTFLAGS="-Cprofile-use=$profiles/merged.profdata" CARGO_TARGET_DIR=$use_dir \
  cargo build --profile production --target "$host" --bin modgate
echo "$use_dir/$host/production/modgate"
