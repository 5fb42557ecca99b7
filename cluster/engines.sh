#!/usr/bin/env bash
# Run the pod runner (cluster/harness/podrunner.py) in the background: a simengine for every Running engine
# pod of the local cluster, Prometheus file_sd targets for them, and a loopback proxy per service.
#   cluster/engines.sh start|stop|status|logs
# Env: INFERSCALE_ENGINE_PROFILE (simengine profile, default test), INFERSCALE_ENGINE_COLD_START
#      (seconds before an engine's /health is 200, default 5), INFERSCALE_PYTHON (default the repo's
#      .venv), INFERSCALE_CLUSTER_DIR. State in $state/engines (services.json: each service's proxy
#      URL and engines; targets.json; logs/ of the engines); log in $state/logs/engines.log.
# Idempotent: start exits 0 at once when it is already running.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
root="$(cd "$here/.." && pwd)"

python="${INFERSCALE_PYTHON:-$root/.venv/bin/python}"
pidfile="$pids/engines.pid"
log="$logs/engines.log"
marker="harness.podrunner --state-dir $engines_dir "
running() { pid_matches "$pidfile" "$marker"; }

case "${1:-}" in
  start)
    if running; then
      echo "pod runner already running (pid $(cat "$pidfile")), services: $engines_dir/services.json"
      exit 0
    fi
    if [[ ! -f $kubeconfig ]]; then
      echo "ERROR: no local cluster ($kubeconfig is missing): run cluster/up.sh first" >&2
      exit 1
    fi
    mkdir -p "$engines_dir" "$logs" "$pids"
    rm -f "$engines_dir/runner.json"
    (cd "$root" && exec setsid "$python" -m harness.podrunner --state-dir "$engines_dir" run \
      --kubeconfig "$kubeconfig" \
      --profile "${INFERSCALE_ENGINE_PROFILE:-test}" \
      --cold-start "${INFERSCALE_ENGINE_COLD_START:-5}" \
      </dev/null >"$log" 2>&1) &
    echo $! >"$pidfile"
    # runner.json appears once the runner has listed the pods (and started their engines).
    deadline=$((SECONDS + 30))
    until [[ -s $engines_dir/runner.json ]]; do
      # kill -0, not running(): until setsid has exec'd, the child's cmdline is still this script's.
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null || ((SECONDS >= deadline)); then
        echo "ERROR: the pod runner exited, or did not list the pods within 30s; see $log:" >&2
        tail -n 20 "$log" | sed 's/^/  | /' >&2
        exit 1
      fi
      sleep 0.2
    done
    echo "pod runner started (pid $(cat "$pidfile")), services: $engines_dir/services.json, log: $log"
    ;;
  # The runner drains its engines (at most 10 s) and gives the pods kwok's Ready back.
  stop) stop_pidfile "$pidfile" "$marker" "pod runner" 30 ;;
  status)
    if running; then echo "pod runner running (pid $(cat "$pidfile"))"; else echo "pod runner not running"; exit 3; fi
    ;;
  logs) exec tail -f "$log" ;;
  *) echo "usage: $0 start|stop|status|logs" >&2; exit 2 ;;
esac
