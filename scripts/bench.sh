#!/usr/bin/env bash
# npm run bench: installs what is missing, starts a private Redis, runs bench/run.js.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
prepare_private_run "$root"
# The writer benchmark needs a MongoDB: MONGO_URL, or a private FerretDB for this run.
if [ -z "${MONGO_URL:-}" ] && [ -n "${FERRETDB_BIN:-}" ]; then
  port=$(free_port)
  mkdir -p "$run_dir/ferretdb"
  "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$run_dir/ferretdb/" --listen-addr="127.0.0.1:$port" --telemetry=disable --debug-addr=- --log-level=error &
  ferret_pid=$!
  trap 'kill $ferret_pid 2>/dev/null; stop_services; rm -rf "$run_dir"' EXIT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  export MONGO_URL="mongodb://127.0.0.1:$port/crawlfleet_bench"
fi
node bench/run.js
