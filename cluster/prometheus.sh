#!/usr/bin/env bash
# Run Debian's Prometheus for the local cluster, on 127.0.0.1 only, scraping every engine pod's
# simengine (the file_sd targets cluster/engines.sh writes) every 2 s:
#   cluster/prometheus.sh start|stop|status
# Env: INFERSCALE_PROMETHEUS_PORT (default 19090), INFERSCALE_PROMETHEUS (binary, default
#      /usr/bin/prometheus), INFERSCALE_CLUSTER_DIR. Config and data in $state/prometheus, log in
#      $state/logs/prometheus.log. Idempotent: start exits 0 at once when it is already running.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

binary="${INFERSCALE_PROMETHEUS:-/usr/bin/prometheus}"
dir="$state/prometheus"
config="$dir/prometheus.yml"
pidfile="$pids/prometheus.pid"
log="$logs/prometheus.log"
url="http://127.0.0.1:$prometheus_port"
running() { pid_matches "$pidfile" "--config.file=$config"; }

case "${1:-}" in
  start)
    if running; then
      echo "prometheus already running (pid $(cat "$pidfile")) on $url"
      exit 0
    fi
    if [[ ! -x $binary ]]; then
      echo "ERROR: $binary not found: install Debian's prometheus package (\`make deps-demo\`)" >&2
      exit 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$prometheus_port") 2>/dev/null; then
      echo "ERROR: 127.0.0.1:$prometheus_port is already in use by another process; set INFERSCALE_PROMETHEUS_PORT" >&2
      exit 1
    fi
    mkdir -p "$dir/data" "$logs" "$pids" "$engines_dir"
    # The pod runner replaces this file atomically; Prometheus watches it (and rereads it every 5 s).
    [[ -e $engines_dir/targets.json ]] || echo "[]" >"$engines_dir/targets.json"
    cat >"$config" <<YAML
# Written by cluster/prometheus.sh. Fast intervals: the tests and the demo wait on these series.
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
scrape_configs:
  - job_name: engines
    file_sd_configs:
      - files: ["$engines_dir/targets.json"]
        refresh_interval: 5s
YAML
    # setsid: own session, no SIGHUP when the calling shell exits; $! is Prometheus itself.
    setsid "$binary" \
      --config.file="$config" \
      --storage.tsdb.path="$dir/data" \
      --storage.tsdb.retention.time=1d \
      --web.listen-address="127.0.0.1:$prometheus_port" \
      </dev/null >"$log" 2>&1 &
    echo $! >"$pidfile"
    deadline=$((SECONDS + 30))
    until curl -sf --max-time 2 "$url/-/ready" >/dev/null 2>&1; do
      # kill -0, not running(): until setsid has exec'd, the child's cmdline is still this script's.
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null || ((SECONDS >= deadline)); then
        echo "ERROR: prometheus did not become ready on $url; see $log:" >&2
        tail -n 20 "$log" | sed 's/^/  | /' >&2
        exit 1
      fi
      sleep 0.2
    done
    echo "prometheus started (pid $(cat "$pidfile")) on $url, log: $log"
    ;;
  stop) stop_pidfile "$pidfile" "--config.file=$config" prometheus 15 ;;
  status)
    if running; then echo "prometheus running (pid $(cat "$pidfile")) on $url"; else echo "prometheus not running"; exit 3; fi
    ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
