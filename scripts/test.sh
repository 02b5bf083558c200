#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing (Node modules, Redis, FerretDB,
# tinyproxy for the proxy tests, openssl for their https site, Debian's w3lib and parsel for the
# real-pages test's reference decoder, Prometheus and Chromium for the observability test, kustomize
# for the Kubernetes test, warcio, cdxj-indexer and pywb for the WARC test and the chaos suite, docker-compose for `config`, python3-doc for the chaos suite's site),
# starts a private Redis on a free loopback port, builds, lints and checks formatting (`biome ci`),
# type-checks, runs every jest project, then at once the chaos suite's short form (test/chaos)
# followed by the lifecycle fuzzer's (test/fuzz), and the container test (scripts/test-containers.sh). Node 24 is installed first when the machine's is older.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/services.sh"
ensure_debian_package tinyproxy tinyproxy-bin
ensure_debian_package openssl openssl
ensure_debian_python_module w3lib python3-w3lib
ensure_debian_python_module parsel python3-parsel
ensure_debian_package prometheus prometheus
ensure_debian_package chromium chromium
# only `docker-compose config` is used: no Docker engine (a recommended package) is wanted
ensure_debian_package docker-compose docker-compose --no-install-recommends
ensure_debian_package redis-server redis-server
# the chaos suite's site, Debian's Python documentation
ensure_python_docs
ensure_kustomize
ensure_warc_tools
prepare_private_run "$root"
npm run --silent check
npm run --silent typecheck
# The jest projects first, on two workers (JEST_WORKERS): a serial run left 44% of this 2-core
# machine idle, as many tests wait on a site's delays, a lease or an outage. Each worker gets a Redis
# of its own when the run started its own (test/helpers/worker-redis.cjs).
workers="${JEST_WORKERS:-2}"
redis_urls="$REDIS_URL"
if [ "${#CRAWLFLEET_REDIS_PIDFILES[@]}" -gt 0 ]; then
  for worker in $(seq 2 "$workers"); do
    start_redis_server "$run_dir/redis-$worker"
    redis_urls+=",$STARTED_REDIS_URL"
  done
fi
started=$SECONDS
jest_status=0
REDIS_URLS="$redis_urls" node --experimental-vm-modules node_modules/jest/bin/jest.js --maxWorkers="$workers" --forceExit "$@" || jest_status=$?
echo "jest: exit $jest_status after $((SECONDS - started)) s" >&2
# After a whole jest run only (a run of chosen test files skips them), and even when a jest test
# failed, so that one run reports all: three lanes at once, each on servers of its own. The chaos
# suite's short form (test/chaos; `npm run test:chaos` is the full form), the lifecycle fuzzer's
# (test/fuzz, docs/fuzzing.md: two seeded schedules of operations, faults and features), and
# docker-compose.yml in real containers (scripts/test-containers.sh: a Docker engine, Compose v5,
# the images built). One after the other they took 29 minutes in one CI run; the chaos lane is
# mostly FerretDB's one busy core, the containers lane the image builds. Each prints the time it
# took.
timed() { # name command...: runs it, then says how it ended and how long it took
  local name="$1" started=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "$name: exit $status after $((SECONDS - started)) s" >&2
  return $status
}
faults_status=0
containers_status=0
if [ $# -eq 0 ]; then
  # The chaos suite and the fuzzer side by side too: one after the other they left a core idle for
  # the fuzzer's two minutes (a CI run: 698 of 3,640 CPU s idle, most of it in these lanes).
  timed 'chaos (short)' node test/chaos/run.mjs --short &
  chaos_lane=$!
  timed 'fuzz (short)' node test/fuzz/run.mjs --short &
  fuzz_lane=$!
  if [ "${CRAWLFLEET_SKIP_CONTAINERS:-0}" != 1 ]; then
    timed containers bash "$root/scripts/test-containers.sh" || containers_status=$?
  fi
  wait "$chaos_lane" || faults_status=1
  wait "$fuzz_lane" || faults_status=1
fi
[ "$jest_status" -eq 0 ] && [ "$faults_status" -eq 0 ] && [ "$containers_status" -eq 0 ]
