#!/usr/bin/env bash
# The container test: docker-compose.yml as users run it, with the images built from infra/Dockerfile
# (the fleet's, and the renderer's variant with Chromium; test/containers/run.mjs says what it checks). Installs what is missing (Debian's docker.io,
# Compose v5 and buildx built from the Go module proxy, stand-ins for images that cannot be pulled),
# starts the Docker engine if none runs, and stops and removes everything it started, even on failure.
#   bash scripts/test-containers.sh        (npm run test:containers)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/services.sh
source scripts/standin-images.sh

COMPOSE_VERSION=v5.6.0
BUILDX_VERSION=v0.38.2
cache="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet"
run_dir="$(mktemp -d /tmp/crawlfleet-containers.XXXXXX)"
started_dockerd=

cleanup() {
  local status=$?
  if [ -n "${COMPOSE_BIN:-}" ] && [ -n "${CONTAINERS_PROJECT:-}" ]; then
    "$COMPOSE_BIN" -p "$CONTAINERS_PROJECT" -f docker-compose.yml -f test/containers/compose.test.yml --profile monitoring --profile render \
      down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
  fi
  if [ -n "$started_dockerd" ]; then
    kill "$started_dockerd" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$started_dockerd" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$run_dir"
  exit $status
}
trap cleanup EXIT

ensure_docker_engine() {
  ensure_debian_package dockerd docker.io
  if docker info >/dev/null 2>&1; then return 0; fi
  # This VM refuses the engine's default rlimits ("error setting rlimits ... operation not permitted").
  echo "starting dockerd ..." >&2
  dockerd --default-ulimit nofile=20000:20000 --default-ulimit nproc=32768:32768 >"$run_dir/dockerd.log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  tail -20 "$run_dir/dockerd.log" >&2
  return 1
}

ensure_compose() {
  export COMPOSE_BIN="$cache/compose-$COMPOSE_VERSION/docker-compose"
  [ -x "$COMPOSE_BIN" ] || build_go_main_module github.com/docker/compose/v5 "$COMPOSE_VERSION" ./cmd "$COMPOSE_BIN" \
    "-X github.com/docker/compose/v5/internal.Version=$COMPOSE_VERSION"
  # Compose builds through buildx (BuildKit: the Dockerfile's npm cache mount); the engine's own
  # BuildKit serves it. It is a CLI plugin, found in ~/.docker/cli-plugins.
  local buildx="$cache/buildx-$BUILDX_VERSION/docker-buildx" plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  [ -x "$buildx" ] || build_go_main_module github.com/docker/buildx "$BUILDX_VERSION" ./cmd/buildx "$buildx" \
    "-X github.com/docker/buildx/version.Version=$BUILDX_VERSION"
  if [ ! -x "$plugins/docker-buildx" ]; then mkdir -p "$plugins" && ln -sf "$buildx" "$plugins/docker-buildx"; fi
}

ensure_node_modules "$root"
ensure_docker_engine
ensure_compose
ensure_standin_images
ensure_debian_package chromium chromium

export CONTAINERS_PROJECT="crawlfleet-ci-$$"
node test/containers/run.mjs
