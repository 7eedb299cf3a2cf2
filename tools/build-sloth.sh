#!/usr/bin/env bash
# Builds Sloth (the SLO rule generator bench/slo_cost.py measures tritonwatch against) from its Go module, once
# per machine, into the stack's cache; a no-op when it is there.
# `go install github.com/slok/sloth/cmd/sloth@v0.16.0` is refused (its go.mod has replace directives); a
# throwaway module that requires the package ignores them.
set -euo pipefail
: "${TRITONWATCH_STACK_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/tritonwatch/stack}"
SLOTH_VERSION=${SLOTH_VERSION:-v0.16.0}
dest="$TRITONWATCH_STACK_CACHE/sloth-$SLOTH_VERSION"
if [ -x "$dest/bin/sloth" ]; then exit 0; fi
echo "building sloth $SLOTH_VERSION from github.com/slok/sloth (once per machine, into $dest)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
  cd "$work"
  go mod init tritonwatch-sloth-build >/dev/null 2>&1
  GOFLAGS=-mod=mod go get "github.com/slok/sloth/cmd/sloth@$SLOTH_VERSION" >/dev/null
  mkdir -p "$dest/bin.tmp"
  CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/slok/sloth/internal/info.Version=$SLOTH_VERSION" \
    -o "$dest/bin.tmp/sloth" github.com/slok/sloth/cmd/sloth
)
rm -rf "$dest/bin" && mv "$dest/bin.tmp" "$dest/bin"
