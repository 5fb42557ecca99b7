#!/usr/bin/env bash
# Run the operator against the local cluster in the background (for the demo):
#   cluster/operator.sh start|stop|logs
# It installs the CRD first. Logs go to $STATE/logs/operator.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$root/cluster/env.sh"
state="${INFERSCALE_CLUSTER_DIR:-$HOME/.cache/inferscale/cluster}"
pidfile="$state/pids/operator.pid"
log="$state/logs/operator.log"

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "${1:-}" in
  start)
    kubectl apply -f "$root/crds/" >/dev/null
    kubectl wait --for=condition=Established crd/inferenceservices.inferscale.io --timeout=60s >/dev/null
    if running; then
      echo "operator already running (pid $(cat "$pidfile")), log: $log"
      exit 0
    fi
    mkdir -p "$(dirname "$pidfile")" "$(dirname "$log")"
    # With the local Prometheus up (cluster/prometheus.sh), scale from it on short windows.
    if [[ -n "${INFERSCALE_PROMETHEUS_URL:-}" ]]; then
      export INFERSCALE_TICK_SECONDS="${INFERSCALE_TICK_SECONDS:-5}"
      export INFERSCALE_TTFT_WINDOW_SECONDS="${INFERSCALE_TTFT_WINDOW_SECONDS:-30}"
      export INFERSCALE_STALE_AFTER_SECONDS="${INFERSCALE_STALE_AFTER_SECONDS:-20}"
    fi
    setsid nohup "$root/.venv/bin/inferscale" operator run >"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    echo "operator started (pid $!), log: $log"
    ;;
  stop)
    if running; then
      kill "$(cat "$pidfile")"
      for _ in $(seq 50); do running || break; sleep 0.2; done
      running && kill -9 "$(cat "$pidfile")"
      echo "operator stopped"
    fi
    rm -f "$pidfile"
    ;;
  logs) exec tail -f "$log" ;;
  *) echo "usage: $0 start|stop|logs" >&2; exit 2 ;;
esac
