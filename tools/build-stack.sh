#!/usr/bin/env bash
# Builds today's Prometheus stack from its Go modules, once per machine, into a cache outside the checkout:
# Prometheus + promtool 3.x, Alertmanager + amtool, VictoriaMetrics + vmalert. The tests run every
# Prometheus-side check on these and on Debian's packages (tests/support/stacks.py).
# A throwaway module requires each package: `go install pkg@version` is refused while the dependency's go.mod
# has replace directives, and a requiring module ignores them.
set -euo pipefail
: "${TRITONWATCH_STACK_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/tritonwatch/stack}"
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}        # Prometheus 3.16
ALERTMANAGER_VERSION=${ALERTMANAGER_VERSION:-v0.35.0}
VICTORIAMETRICS_VERSION=${VICTORIAMETRICS_VERSION:-v1.151.0}

build() {  # build NAME MODULE VERSION PKG...
  local name=$1 module=$2 version=$3; shift 3
  local dest="$TRITONWATCH_STACK_CACHE/$name-$version"
  local want=()
  for pkg in "$@"; do want+=("$dest/bin/$(basename "$pkg")"); done
  local ok=1
  for f in "${want[@]}"; do [ -x "$f" ] || ok=0; done
  if [ "$ok" = 1 ]; then return 0; fi
  echo "building $name $version from $module (once per machine, into $dest)"
  local work; work=$(mktemp -d)
  (
    cd "$work"
    go mod init tritonwatch-stack-build >/dev/null 2>&1
    for pkg in "$@"; do GOFLAGS=-mod=mod go get "$module/$pkg@$version" >/dev/null; done
    mkdir -p "$dest/bin.tmp"
    for pkg in "$@"; do
      CGO_ENABLED=0 go build -trimpath -o "$dest/bin.tmp/$(basename "$pkg")" "$module/$pkg"
    done
  )
  rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
  rm -rf "$work"
}

# Alertmanager's module embeds its web UI's build output (ui/app/dist), which the module zip does not carry:
# built from a copy of the module with an empty UI in its place (the HTTP API, all the tests use, is whole).
build_ui_less() {  # build_ui_less NAME MODULE VERSION PKG...
  local name=$1 module=$2 version=$3; shift 3
  local dest="$TRITONWATCH_STACK_CACHE/$name-$version"
  local ok=1
  for pkg in "$@"; do [ -x "$dest/bin/$(basename "$pkg")" ] || ok=0; done
  if [ "$ok" = 1 ]; then return 0; fi
  echo "building $name $version from $module (once per machine, into $dest; web UI left out)"
  local work; work=$(mktemp -d)
  (
    cd "$work"
    GOFLAGS=-mod=mod go mod download -json "$module@$version" >"$work/module.json"
    src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$work/module.json")
    cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
    mkdir -p "$work/src/ui/app/dist/elm" "$work/src/ui/app/dist/mantine"
    echo "web UI not built" >"$work/src/ui/app/dist/elm/index.html"
    echo "web UI not built" >"$work/src/ui/app/dist/mantine/index.html"
    mkdir -p "$dest/bin.tmp"
    cd "$work/src"
    for pkg in "$@"; do
      CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=${version#v}" \
        -o "$dest/bin.tmp/$(basename "$pkg")" "./$pkg"
    done
  )
  rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
  rm -rf "$work"
}

build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" cmd/prometheus cmd/promtool
build_ui_less alertmanager github.com/prometheus/alertmanager "$ALERTMANAGER_VERSION" cmd/alertmanager cmd/amtool
build victoriametrics github.com/VictoriaMetrics/VictoriaMetrics "$VICTORIAMETRICS_VERSION" app/victoria-metrics app/vmalert
