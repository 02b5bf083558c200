#!/usr/bin/env bash
# npm run bench: installs what is missing, starts a private Redis, runs bench/run.js.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
prepare_private_run "$root"
node bench/run.js
