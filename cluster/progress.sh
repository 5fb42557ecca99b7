#!/usr/bin/env bash
# Long steps (building a binary, installing the Python environment) say what they do, how long
# they took last time, and every minute that they are still at it; each one's time is kept in
# $cache/times/NAME for the next run. Source it for `step`, or run it:
#   cluster/progress.sh NAME WHAT CMD...
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
times="$cache/times"

# step NAME WHAT CMD...: run CMD in a subshell (so it may cd), announced as WHAT; its exit status.
# Call it as a plain command, not in `if` or `||`: there bash ignores `set -e` inside CMD.
step() {
  local name=$1 what=$2 last="" t0 ticker rc
  shift 2
  [[ -r $times/$name ]] && last="$(cat "$times/$name")"
  if [[ -n $last ]]; then echo "==> $what (took $last s last time)"; else echo "==> $what (first time here)"; fi
  t0=$SECONDS
  # A line a minute, so a 10-minute build does not look hung; it stops when this shell is gone.
  (
    while sleep 60 </dev/null >/dev/null 2>&1 && kill -0 $$ 2>/dev/null; do
      echo "    ... $((SECONDS - t0)) s so far${last:+ (took $last s last time)}"
    done
  ) &
  ticker=$!
  set +e
  (
    set -e
    "$@"
  )
  rc=$?
  set -e
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((rc != 0)); then
    echo "ERROR: $what failed after $((SECONDS - t0)) s" >&2
    return "$rc"
  fi
  mkdir -p "$times"
  echo "$((SECONDS - t0))" >"$times/$name"
  echo "    done in $((SECONDS - t0)) s"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  step "$@"
fi
