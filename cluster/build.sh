#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and
# helm from their Go modules into a cache outside the repository, keyed by version (helm
# in a folder of its own, so bumping it rebuilds neither it nor the control plane in vain).
# A second run with the same versions is a no-op.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

cache="${INFERSCALE_CACHE:-$HOME/.cache/inferscale}"
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
helm_bin="$cache/bin/helm-$HELM_VERSION"
work="$cache/build"
mkdir -p "$bin" "$helm_bin" "$work"

need=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
all_cached() {
  local b
  for b in "${need[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
  [[ -x "$helm_bin/helm" ]]
}
if all_cached; then
  echo "cluster binaries cached in $bin and $helm_bin"
  exit 0
fi

# One build at a time: a second caller waits, then finds the binaries cached.
exec 9>"$cache/build.lock"
flock 9
if all_cached; then
  echo "cluster binaries cached in $bin and $helm_bin (built by a concurrent run)"
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

build_kubernetes() {
  local dir="$work/kubernetes-$KUBERNETES_VERSION"
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  mkdir -p "$dir" && cd "$dir"
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
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  go build -trimpath -ldflags "$ld" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_kwok() {
  local dir="$work/kwok-$KWOK_VERSION"
  mkdir -p "$dir" && cd "$dir"
  [[ -f go.mod ]] || go mod init inferscale.local/kwok-build >/dev/null
  go get "sigs.k8s.io/kwok@$KWOK_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
  # kwok v0.8 ships no built-in stages; keep the ones we run with beside the binary.
  local src; src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  mkdir -p "$bin/kwok-stages"
  cp "$src/node/fast/node-initialize.yaml" "$src/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$src/pod/fast/pod-ready.yaml" "$src/pod/fast/pod-complete.yaml" "$src/pod/fast/pod-delete.yaml" "$bin/kwok-stages/"
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

[[ -x "$bin/etcd" ]] || (build_etcd)
echo "etcd built after $((SECONDS - start))s"
[[ -x "$bin/kwok" ]] || (build_kwok)
echo "kwok built after $((SECONDS - start))s"
k8s_ok=1
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do [[ -x "$bin/$b" ]] || k8s_ok=0; done
[[ $k8s_ok == 1 ]] || (build_kubernetes)
echo "kubernetes built after $((SECONDS - start))s"
[[ -x "$helm_bin/helm" ]] || (build_helm)
echo "cluster binaries built in $((SECONDS - start))s into $bin and $helm_bin"
