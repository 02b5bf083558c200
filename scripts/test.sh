#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing (Node modules, Redis, FerretDB,
# tinyproxy for the proxy tests, openssl for their https site, Debian's w3lib and parsel for the
# real-pages test's reference decoder, Prometheus and Chromium for the observability test, kustomize
# for the Kubernetes test, warcio, cdxj-indexer and pywb for the WARC test and the chaos suite, docker-compose for `config`, python3-doc for the chaos suite's site),
# starts a private Redis on a free loopback port, builds, lints and checks formatting (`biome ci`),
# type-checks, then runs every jest project while three lanes run beside it: the chaos suite's short
# form (test/chaos), the lifecycle fuzzer's (test/fuzz) and the container test
# (scripts/test-containers.sh). Node 24 is installed first when the machine's is older.
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
# The three lanes start first, in the background, each on servers of its own, when the whole suite
# runs (a run of chosen test files skips them): the chaos suite's short form (test/chaos; `npm run
# test:chaos` is the full form), the lifecycle fuzzer's (test/fuzz, docs/fuzzing.md: two seeded
# schedules of operations, faults and features), and docker-compose.yml in real containers
# (scripts/test-containers.sh: a Docker engine, Compose v5, the images built). Run after jest they
# left a core idle for most of their 4 to 6 minutes, and jest itself kept only 55% of the two cores
# busy (CI at 4dfc3e8: 918 CPU s counted in jest's 832 s): many tests wait on a site's delays, a
# lease or an outage. Each lane's output goes to test-artifacts/lanes/NAME.log, printed when the
# lane ends, so that it does not cut through jest's report.
lanes_dir="$root/test-artifacts/lanes"
lane_names=()
lane_pids=()
start_lane() { # name command...: runs it in the background; its output and how it ended go to its log
  local name="$1" log="$lanes_dir/$1.log"
  shift
  (
    started=$SECONDS
    status=0
    "$@" >"$log" 2>&1 </dev/null || status=$?
    echo "$name: exit $status after $((SECONDS - started)) s" >>"$log"
    exit $status
  ) &
  lane_names+=("$name")
  lane_pids+=($!)
}
if [ $# -eq 0 ]; then
  rm -rf "$lanes_dir" && mkdir -p "$lanes_dir"
  start_lane chaos-short node test/chaos/run.mjs --short
  start_lane fuzz-short node test/fuzz/run.mjs --short
  [ "${CRAWLFLEET_SKIP_CONTAINERS:-0}" = 1 ] || start_lane containers bash "$root/scripts/test-containers.sh"
  echo "lanes started in the background: ${lane_names[*]} (their logs: $lanes_dir)" >&2
fi
# Then the jest projects, on two workers (JEST_WORKERS): a serial run left 44% of this 2-core
# machine idle. Each worker gets a Redis of its own when the run started its own
# (test/helpers/worker-redis.cjs).
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
# Even when a jest test failed, so that one run reports all.
lanes_status=0
for index in "${!lane_pids[@]}"; do
  status=0
  wait "${lane_pids[$index]}" || status=$?
  echo "---- lane ${lane_names[$index]} ----" >&2
  cat "$lanes_dir/${lane_names[$index]}.log" >&2
  [ "$status" -eq 0 ] || lanes_status=1
done
[ "$jest_status" -eq 0 ] && [ "$lanes_status" -eq 0 ]
