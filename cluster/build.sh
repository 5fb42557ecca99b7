#!/usr/bin/env bash
# Build the local cluster's binaries from their Go modules into a cache outside the
# repository, keyed by version:
#   cluster/build.sh [control-plane]  etcd, kube-apiserver, kube-controller-manager,
#                                     kube-scheduler, kubectl and kwok (cluster/up.sh)
#   cluster/build.sh helm             helm, for the chart's tests (`make helm`, `make test`)
# Helm is in a folder of its own, so bumping it rebuilds neither it nor the control plane in
# vain, and the demo never waits for it. Each binary says how long it took last time
# (cluster/progress.sh). A second run with the same versions is a no-op.
set -euo pipefail
# shellcheck source=progress.sh
source "$(dirname "$0")/progress.sh" # and common.sh: versions, $cache, $bin, $helm_bin
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

what="${1:-control-plane}"
case "$what" in
  control-plane)
    need=("$bin"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kwok})
    label="control plane binaries"
    where="$bin"
    ;;
  helm)
    need=("$helm_bin/helm")
    label=helm
    where="$helm_bin"
    ;;
  *) echo "usage: $0 [control-plane|helm]" >&2; exit 2 ;;
esac
work="$cache/build"
mkdir -p "$where" "$work"

all_cached() {
  local b
  for b in "${need[@]}"; do [[ -x $b ]] || return 1; done
}
if all_cached; then
  echo "$label cached in $where"
  exit 0
fi

if ! command -v go >/dev/null; then
  echo "ERROR: go not found on PATH: the local cluster is built from Go modules; install Go 1.26 (https://go.dev/dl/) and put its bin folder on PATH" >&2
  exit 1
fi

# One build at a time: a second caller waits, then finds the binaries cached.
exec 9>"$cache/build.lock"
flock 9
if all_cached; then
  echo "$label cached in $where (built by a concurrent run)"
  exit 0
fi

start=$SECONDS

build_etcd() {
  local dir="$work/etcd-$ETCD_VERSION"
  mkdir -p "$dir" && cd "$dir"
  [[ -f go.mod ]] || go mod init inferscale.local/etcd-build >/dev/null
  # etcd's own replace lines point at sibling folders, but a dependency's replaces are
  # ignored; its requirements already name the published sibling modules.
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

# The module that builds Kubernetes' commands.
kubernetes_dir="$work/kubernetes-$KUBERNETES_VERSION"
kubernetes_module() {
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  mkdir -p "$kubernetes_dir" && cd "$kubernetes_dir"
  [[ -f go.mod ]] || go mod init inferscale.local/kubernetes-build >/dev/null
  go mod download "k8s.io/kubernetes@$KUBERNETES_VERSION"
  local mod; mod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBERNETES_VERSION.mod"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
  # paths; a dependent must replace each with the published v0.X.Y (derived, not hand-copied).
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$mod" | awk '{print $1}' | while read -r m; do
    go mod edit -replace="$m=$m@$staging"
  done
  go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
  cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy
}

# build_kubernetes CMD: one of Kubernetes' commands, from the module above. The first one
# compiles most of what the others share (Go's build cache keeps it), so it takes longest.
build_kubernetes() {
  cd "$kubernetes_dir"
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  go build -trimpath -ldflags "$ld" -o "$bin/$1" "k8s.io/kubernetes/cmd/$1"
}

build_kwok() {
  local dir="$work/kwok-$KWOK_VERSION"
  mkdir -p "$dir" && cd "$dir"
  [[ -f go.mod ]] || go mod init inferscale.local/kwok-build >/dev/null
  go get "sigs.k8s.io/kwok@$KWOK_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
  # kwok v0.8 ships no built-in stages; keep the ones we run with beside the binary. The stages that
  # make pods Running are the repository's own (cluster/kwok/): they leave Ready to the pod runner.
  local src; src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  mkdir -p "$bin/kwok-stages"
  cp "$src/node/fast/node-initialize.yaml" "$src/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$src/pod/fast/pod-complete.yaml" "$src/pod/fast/pod-delete.yaml" "$bin/kwok-stages/"
  chmod u+w "$bin"/kwok-stages/*
}

build_helm() {
  local dir="$work/helm-$HELM_VERSION"
  mkdir -p "$dir" && cd "$dir"
  [[ -f go.mod ]] || go mod init inferscale.local/helm-build >/dev/null
  go get "helm.sh/helm/v4@$HELM_VERSION"
  # What helm's own Makefile stamps into a release build (`helm version`).
  local ld="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  go build -trimpath -ldflags "$ld" -o "$helm_bin/helm" helm.sh/helm/v4/cmd/helm
}

if [[ $what == helm ]]; then
  step helm "building helm $HELM_VERSION" build_helm
  echo "helm built in $((SECONDS - start)) s into $helm_bin"
  exit 0
fi

echo "building the local control plane from its Go modules into $bin"
# `if`, not `||`: bash ignores `set -e` in a command that is tested.
if [[ ! -x $bin/etcd ]]; then step etcd "building etcd $ETCD_VERSION" build_etcd; fi
if [[ ! -x $bin/kwok ]]; then step kwok "building kwok $KWOK_VERSION" build_kwok; fi
module_ready=""
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  if [[ -x $bin/$cmd ]]; then continue; fi
  if [[ -z $module_ready ]]; then
    step kubernetes-modules "fetching Kubernetes $KUBERNETES_VERSION's modules" kubernetes_module
    module_ready=1
  fi
  step "$cmd" "building $cmd $KUBERNETES_VERSION" build_kubernetes "$cmd"
done
echo "control plane built in $((SECONDS - start)) s into $bin"
