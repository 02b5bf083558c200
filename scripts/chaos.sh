#!/usr/bin/env bash
# The chaos suite (test/chaos/run.mjs): the fleet as separate processes crawls Debian's Python
# documentation under several host names into MongoDB (FerretDB) while workers, Redis and MongoDB are
# killed. Installs what is missing (Node modules, Redis, FerretDB, python3-doc, the WARC readers), builds, then runs
# the full form, or `--short` (CI's), or `--scenario NAME`. The harness starts its own Redis and
# FerretDB on free loopback ports and ends them, and every worker, when it ends.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
ensure_debian_package redis-server redis-server
# the chaos suite's site: Debian's Python documentation
ensure_python_docs
ensure_node_modules "$root"
ensure_ferretdb
ensure_warc_tools
cd "$root"
exec node test/chaos/run.mjs "$@"
