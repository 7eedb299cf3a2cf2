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

build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" cmd/prometheus cmd/promtool
build alertmanager github.com/prometheus/alertmanager "$ALERTMANAGER_VERSION" cmd/alertmanager cmd/amtool
build victoriametrics github.com/VictoriaMetrics/VictoriaMetrics "$VICTORIAMETRICS_VERSION" app/victoria-metrics app/vmalert
