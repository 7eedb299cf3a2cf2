#!/usr/bin/env bash
# Builds a Kubernetes control plane for the tests from Go modules, once per machine, into the same cache as
# tools/build-stack.sh: kube-apiserver, an etcd launcher (tools/kube/etcd.go) and the Prometheus Operator, and
# copies the Prometheus Operator's and KEDA's CRDs from their modules. A no-op when they are there.
# No kubelet, scheduler or controller manager: the operator writes its rule ConfigMaps and its generated
# Alertmanager configuration before it touches a StatefulSet.
set -euo pipefail
: "${TRITONWATCH_STACK_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/tritonwatch/stack}"
KUBERNETES_VERSION=${KUBERNETES_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.13}
OPERATOR_VERSION=${OPERATOR_VERSION:-v0.93.0}
KEDA_VERSION=${KEDA_VERSION:-v2.21.1}
here=$(cd "$(dirname "$0")" && pwd)

module_dir() {  # module_dir MODULE VERSION: the module's folder in the module cache (downloads it once)
  # KEDA's go.mod asks for a newer Go than this machine's to build; downloading its files needs none.
  GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download "$1@$2" 2>/dev/null || true
  local dir; dir="$(go env GOMODCACHE)/$(echo "$1" | sed 's/[A-Z]/!\L&/g')@$2"
  [ -d "$dir" ] || { echo "module $1@$2 not in the module cache ($dir)" >&2; exit 1; }
  echo "$dir"
}

ldflag_version() { echo "-X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/component-base/version.gitMajor=$(echo "${1#v}" | cut -d. -f1) -X k8s.io/component-base/version.gitMinor=$(echo "${1#v}" | cut -d. -f2)"; }

# kube-apiserver: k8s.io/kubernetes replaces its ~30 staging modules (k8s.io/api, k8s.io/apiserver...) with
# folders its module zip does not carry; a wrapper module points each at its published v0.X.Y instead.
kube_apiserver() {
  local dest="$TRITONWATCH_STACK_CACHE/kubernetes-$KUBERNETES_VERSION"
  [ -x "$dest/bin/kube-apiserver" ] && return 0
  echo "building kube-apiserver $KUBERNETES_VERSION (once per machine, into $dest)"
  local work; work=$(mktemp -d)
  (
    cd "$work"
    go mod init tritonwatch-kube-build >/dev/null 2>&1
    local src; src=$(module_dir k8s.io/kubernetes "$KUBERNETES_VERSION")
    local staging="v0.${KUBERNETES_VERSION#v1.}"
    go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$src/go.mod"); do
      go mod edit -replace="$m=$m@$staging"
    done
    printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1
    mkdir -p "$dest/bin.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "$(ldflag_version "$KUBERNETES_VERSION")" \
      -o "$dest/bin.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  )
  rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
  rm -rf "$work"
}

etcd() {
  local dest="$TRITONWATCH_STACK_CACHE/etcd-$ETCD_VERSION"
  [ -x "$dest/bin/etcd-embed" ] && return 0
  echo "building etcd $ETCD_VERSION's embed launcher (once per machine, into $dest)"
  local work; work=$(mktemp -d)
  (
    cd "$work"
    go mod init tritonwatch-etcd-build >/dev/null 2>&1
    cp "$here/kube/etcd.go" main.go
    GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1
    mkdir -p "$dest/bin.tmp"
    CGO_ENABLED=0 go build -trimpath -o "$dest/bin.tmp/etcd-embed" .
  )
  rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
  rm -rf "$work"
}

# The operator's main module requires its own pkg/apis and pkg/client modules through replaces; cloud.google.com/go
# at latest resolves an ambiguous import of cloud.google.com/go/compute/metadata.
operator() {
  local dest="$TRITONWATCH_STACK_CACHE/prometheus-operator-$OPERATOR_VERSION"
  local mod=github.com/prometheus-operator/prometheus-operator
  if [ ! -x "$dest/bin/operator" ]; then
    echo "building the Prometheus Operator $OPERATOR_VERSION (once per machine, into $dest)"
    local work; work=$(mktemp -d)
    (
      cd "$work"
      go mod init tritonwatch-operator-build >/dev/null 2>&1
      printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/operator"\n' "$mod" >tools.go
      GOFLAGS=-mod=mod go get "$mod@$OPERATOR_VERSION" "$mod/pkg/apis/monitoring@$OPERATOR_VERSION" \
        "$mod/pkg/client@$OPERATOR_VERSION" >/dev/null 2>&1
      GOFLAGS=-mod=mod go get cloud.google.com/go@latest >/dev/null 2>&1
      GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1
      mkdir -p "$dest/bin.tmp"
      CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=${OPERATOR_VERSION#v}" \
        -o "$dest/bin.tmp/operator" "$mod/cmd/operator"
    )
    rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
    rm -rf "$work"
  fi
  if [ ! -d "$dest/crds" ]; then
    local src; src=$(module_dir "$mod" "$OPERATOR_VERSION")
    rm -rf "$dest/crds.tmp" && mkdir -p "$dest/crds.tmp"
    cp "$src"/example/prometheus-operator-crd/*.yaml "$dest/crds.tmp/"
    chmod u+w "$dest/crds.tmp"/*.yaml
    mv "$dest/crds.tmp" "$dest/crds"
  fi
}

keda_crds() {
  local dest="$TRITONWATCH_STACK_CACHE/keda-$KEDA_VERSION"
  [ -d "$dest/crds" ] && return 0
  local src; src=$(module_dir github.com/kedacore/keda/v2 "$KEDA_VERSION")
  rm -rf "$dest/crds.tmp" && mkdir -p "$dest/crds.tmp"
  cp "$src"/config/crd/bases/*.yaml "$dest/crds.tmp/"
  chmod u+w "$dest/crds.tmp"/*.yaml
  mv "$dest/crds.tmp" "$dest/crds"
}

# Each part alone: tools/build-kube.sh kube_apiserver (the parts are independent; all by default).
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(keda_crds etcd operator kube_apiserver)
for part in "${parts[@]}"; do
  case $part in
    keda_crds | etcd | operator | kube_apiserver) "$part" ;;
    *) echo "build-kube.sh: no part $part (keda_crds, etcd, operator, kube_apiserver)" >&2; exit 2 ;;
  esac
done
