#!/usr/bin/env bash
# npm run bench: installs what is missing (nginx for the sites, GNU time for the per-process figures,
# python3-doc for the documentation site), starts a private Redis and a private FerretDB, runs
# bench/run.js (its head lists the knobs: BENCH_ROUNDS, BENCH_SITES, BENCH_MODES, ...), then the
# render benchmark, bench/render.js (Chromium: Debian's chromium unless BENCH_CHROMIUM is given;
# BENCH_RENDER=0 skips it; its head lists its knobs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
ensure_debian_package nginx nginx
ensure_debian_package /usr/bin/time time
# the documentation site (python3-doc)
ensure_python_docs
# nginx lives in /usr/sbin, which a non-root PATH may lack
export PATH="$PATH:/usr/sbin"
prepare_private_run "$root"
# fleet-np-mongo and the writer benchmark need a MongoDB: MONGO_URL, or a private FerretDB for this run.
if [ -z "${MONGO_URL:-}" ] && [ -n "${FERRETDB_BIN:-}" ]; then
  port=$(free_port)
  mkdir -p "$run_dir/ferretdb"
  "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$run_dir/ferretdb/" --listen-addr="127.0.0.1:$port" --telemetry=disable --debug-addr=- --log-level=error &
  ferret_pid=$!
  trap 'kill $ferret_pid 2>/dev/null; stop_services; rm -rf "$run_dir"' EXIT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  export MONGO_URL="mongodb://127.0.0.1:$port/crawlfleet_bench"
  # its CPU is read from /proc for the MongoDB mode's store figures
  export BENCH_STORE_PID=$ferret_pid
fi
node bench/run.js
if [ "${BENCH_RENDER:-1}" = 1 ]; then
  [ -n "${BENCH_CHROMIUM:-}" ] || ensure_debian_package chromium chromium
  node bench/render.js
fi
