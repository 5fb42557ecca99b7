# Shared settings of cluster/up.sh and cluster/down.sh (sourced, not run).
# Every path and port can be overridden from the environment.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

# Same cache layout as build.sh, so up.sh finds what build.sh produced.
cache="${INFERSCALE_CACHE:-$HOME/.cache/inferscale}"
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
helm_bin="$cache/bin/helm-$HELM_VERSION"

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

# Beside the control plane (cluster/prometheus.sh, cluster/engines.sh): Prometheus on loopback,
# and the pod runner's state (Prometheus file_sd targets, service proxies, engine logs).
prometheus_port="${INFERSCALE_PROMETHEUS_PORT:-19090}"
engines_dir="$state/engines"

# pid_matches PIDFILE TEXT: the pid in PIDFILE is alive and its command line contains TEXT (so a
# stale pid file, or its pid recycled by another process, does not count).
pid_matches() {
  local pid cmd
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [[ -n $pid ]] || return 1
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ $cmd == *"$2"* ]]
}

# stop_pidfile PIDFILE TEXT NAME GRACE: SIGTERM the process of PIDFILE (if pid_matches), SIGKILL it
# after GRACE seconds, wait until it is gone, remove the pid file.
stop_pidfile() {
  local pid deadline
  if pid_matches "$1" "$2"; then
    pid="$(cat "$1")"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + $4))
    while pid_matches "$1" "$2" && ((SECONDS < deadline)); do sleep 0.1; done
    if pid_matches "$1" "$2"; then
      echo "$3 (pid $pid) did not stop within $4s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      while pid_matches "$1" "$2"; do sleep 0.1; done
    fi
    echo "stopped $3 (pid $pid)"
  fi
  rm -f "$1"
}
