#!/usr/bin/env bash
# Install the Debian packages a make target needs and the machine lacks (a no-op when all are there):
#   cluster/deps.sh venv   what `python3 -m venv` needs (`make install`): Debian ships ensurepip
#                          apart, in python3.X-venv
#   cluster/deps.sh demo   openssl and curl (cluster/up.sh: certificates, health checks) and
#                          Prometheus (cluster/prometheus.sh) (`make demo`)
#   cluster/deps.sh test   the demo's, and mmdebstrap and umoci (`make image`), podman and runc
#                          (tests/e2e/test_image.py runs the image) (`make test`)
# Go (for cluster/build.sh) and Python 3.11+ come from the machine: Debian's own Go is too old.
# Env: PYTHON (for venv, default python3).
set -euo pipefail

# need PACKAGE PRESENT...: PACKAGE is missing unless the command PRESENT succeeds.
missing=()
need() {
  local package=$1
  shift
  "$@" >/dev/null 2>&1 || missing+=("$package")
}
has() { command -v "$1"; }

demo() {
  need openssl has openssl
  need curl has curl
  # Debian's package, at the path cluster/prometheus.sh and cluster/harness/testing.py run.
  need prometheus test -x /usr/bin/prometheus
}

case "${1:-}" in
  venv)
    python="${PYTHON:-python3}"
    if ! has "$python" >/dev/null; then
      echo "ERROR: $python not found: install Python 3.11 or newer (Debian: apt-get install python3), or set PYTHON" >&2
      exit 1
    fi
    version="$("$python" -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')"
    need "python$version-venv" "$python" -c 'import ensurepip, venv'
    ;;
  demo) demo ;;
  test)
    demo
    need mmdebstrap has mmdebstrap
    need umoci has umoci
    need podman has podman
    need runc has runc
    ;;
  *)
    echo "usage: $0 venv|demo|test" >&2
    exit 2
    ;;
esac

((${#missing[@]} > 0)) || exit 0
if ! has apt-get >/dev/null; then
  echo "ERROR: missing ${missing[*]}, and this is not Debian (no apt-get): install them with your package manager" >&2
  exit 1
fi
sudo=()
if ((EUID != 0)); then
  if ! has sudo >/dev/null; then
    echo "ERROR: missing ${missing[*]}: run as root, or: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
echo "==> installing Debian packages: ${missing[*]}"
t0=$SECONDS
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "    done in $((SECONDS - t0)) s"
