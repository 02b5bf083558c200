#!/usr/bin/env bash
# The lifecycle fuzzer (test/fuzz/run.mjs, docs/fuzzing.md): random schedules of operations, faults and
# features against a fleet of separate processes, each drawn from a seed that replays it. Installs what
# is missing (Node modules, Redis, FerretDB, Chromium, the WARC readers), builds, then runs
#   --short                  CI's form: a fixed small set of seeds
#   --minutes N              new seeds until N minutes are up, and a summary
#   --seed S (repeatable)    these seeds' schedules (add --form short for a seed of the short form)
# The harness starts its own Redis and FerretDB on free loopback ports and ends them, and every worker.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
ensure_debian_package redis-server redis-server
ensure_debian_package chromium chromium
ensure_node_modules "$root"
ensure_ferretdb
ensure_warc_tools
cd "$root"
npm run --silent build
exec node test/fuzz/run.mjs "$@"
