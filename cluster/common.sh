# Shared settings of cluster/up.sh and cluster/down.sh (sourced, not run).
# Every path and port can be overridden from the environment.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

# Same cache layout as build.sh, so up.sh finds what build.sh produced.
cache="${INFERSCALE_CACHE:-$HOME/.cache/inferscale}"
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"

state="${INFERSCALE_CLUSTER_DIR:-$HOME/.cache/inferscale/cluster}"
certs="$state/certs"
logs="$state/logs"
pids="$state/pids"
kubeconfig="$state/kubeconfig"

# Non-default ports so a real cluster (6443, 2379, 10257, 10259) on the host does not clash.
etcd_port="${INFERSCALE_ETCD_PORT:-23790}"
etcd_peer_port="${INFERSCALE_ETCD_PEER_PORT:-23800}"
apiserver_port="${INFERSCALE_APISERVER_PORT:-16443}"
kcm_port="${INFERSCALE_KCM_PORT:-16257}"
scheduler_port="${INFERSCALE_SCHEDULER_PORT:-16259}"

service_cidr="10.96.0.0/24"
service_ip="10.96.0.1" # first IP of service_cidr: the `kubernetes` Service
pod_cidr="10.244.0.0/16"

# Start order; down.sh stops in reverse.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# Is pid $1 one of our components? Its executable must be one of $components and its
# command line must name a file under $state: that tells our processes from anything
# else (a kubectl run with our kubeconfig, a recycled pid in a stale pid file).
is_ours() {
  local exe cmd
  exe="$(readlink "/proc/$1/exe" 2>/dev/null)" || return 1
  exe="${exe% (deleted)}"
  [[ " ${components[*]} " == *" ${exe##*/} "* ]] || return 1
  cmd="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ $cmd == *"=$state/"* ]]
}

# Pids of all live component processes started from this state dir (pid files or not).
cluster_pids() {
  local d pid
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    if is_ours "$pid"; then echo "$pid"; fi
  done
}

# True when the pid in $pids/<component>.pid is alive and ours.
component_alive() {
  local pid
  pid="$(cat "$pids/$1.pid" 2>/dev/null)" || return 1
  [[ -n $pid ]] && is_ours "$pid"
}
