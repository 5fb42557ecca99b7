#!/usr/bin/env bash
# Stop the local cluster started by cluster/up.sh and delete its state (certs, etcd data,
# logs, kubeconfig): the next up.sh starts a fresh cluster. Exits 0 when nothing runs.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

grace="${INFERSCALE_CLUSTER_STOP_TIMEOUT:-15}"

# The pod runner first, while the apiserver still answers (it drains its engines and gives the pods
# kwok's Ready back), then Prometheus: both are no-ops when they do not run.
"$here/engines.sh" stop
"$here/prometheus.sh" stop

# Stop one at a time in reverse start order: clients before the apiserver, the apiserver
# before etcd (an apiserver whose etcd vanished first hangs in its graceful shutdown).
# Pids from the pid files, plus any of our components without one (e.g. a pid file lost
# to an interrupted up.sh).
stop_pids=()
for ((i = ${#components[@]} - 1; i >= 0; i--)); do
  c="${components[i]}"
  if component_alive "$c"; then stop_pids+=("$(cat "$pids/$c.pid")"); fi
done
for pid in $(cluster_pids); do
  [[ " ${stop_pids[*]} " == *" $pid "* ]] || stop_pids+=("$pid")
done

if ((${#stop_pids[@]} == 0)); then echo "no cluster processes running"; fi
for pid in "${stop_pids[@]}"; do
  name="$(readlink "/proc/$pid/exe" 2>/dev/null)" || continue
  name="${name##*/}"
  kill -TERM "$pid" 2>/dev/null || continue
  deadline=$((SECONDS + grace))
  while is_ours "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  if is_ours "$pid"; then
    echo "$name (pid $pid) did not stop within ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    # SIGKILL is asynchronous: wait until it is gone so its ports are free for a new up.sh.
    while is_ours "$pid"; do sleep 0.1; done
  fi
  echo "stopped $name (pid $pid)"
done

# Remove only what up.sh creates, never the whole directory blindly: INFERSCALE_CLUSTER_DIR
# might point somewhere that holds other files.
if [[ -d $state ]]; then
  rm -rf "$certs" "$logs" "$pids" "$state/etcd" "$state/config" "$state/bin" "$kubeconfig" \
    "$state/apiserver" "$state/kube-controller-manager" "$state/kube-scheduler" \
    "$engines_dir" "$state/prometheus"
  rmdir "$state" 2>/dev/null || true
  echo "removed cluster state in $state"
fi
