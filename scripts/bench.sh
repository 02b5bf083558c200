#!/usr/bin/env bash
# npm run bench: installs what is missing, starts a private Redis, runs bench/run.js.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
run_dir="$(mktemp -d /tmp/crawlfleet-bench.XXXXXX)"
trap 'stop_services; rm -rf "$run_dir"' EXIT
ensure_node_modules "$root"
start_redis "$run_dir"
cd "$root"
node bench/run.js
