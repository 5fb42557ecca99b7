#!/usr/bin/env bash
# Build the operator's OCI image without Docker (`make image`): Debian's own python3 in a
# minbase root filesystem (mmdebstrap), a venv with the pinned lock and our wheel, a
# non-root user, then an OCI image layout and archive (umoci). No compiler goes in: every
# dependency comes as a binary wheel. Needs root (mmdebstrap --mode=root, chroot) and the
# Debian packages mmdebstrap and umoci (`make deps`).
#
# Out: build/image/oci (OCI layout, tag $tag) and build/image/inferscale-$tag.oci.tar
# (`podman load -i` it, or `skopeo copy oci-archive:... docker://<registry>/inferscale:$tag`).
# Cached in ~/.cache/inferscale/image: the Debian rootfs tarball (keyed by suite and
# package list) and the wheels (keyed by file name); `rm -rf` that folder to refresh Debian.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

suite=bookworm
mirror="${INFERSCALE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# ca-certificates: an https Prometheus signed by a public CA (the chart's caSecret is optional).
packages=python3,ca-certificates
pip_version=26.3 # the installer, run from its wheel inside the rootfs and removed afterwards
uid=10001        # charts/inferscale/templates/deployment.yaml: runAsUser/runAsGroup
tag="$(sed -n 's/^version = "\(.*\)"/\1/p' operator/pyproject.toml)"
python="${PYTHON:-python3}"

cache="${INFERSCALE_CACHE:-$HOME/.cache/inferscale}/image"
out="$root/build/image"
mkdir -p "$cache/wheels" "$out"

t_all=$EPOCHREALTIME
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
step() { echo "==> $*"; t_step=$EPOCHREALTIME; }
done_step() { echo "    took $(since "$t_step")s"; }

for tool in mmdebstrap umoci chroot; do
  command -v "$tool" >/dev/null || { echo "image: $tool not found: run \`make deps\` (Debian's $tool)" >&2; exit 1; }
done
[[ $EUID -eq 0 ]] || { echo "image: run as root (mmdebstrap --mode=root and chroot)" >&2; exit 1; }

# One build at a time per cache: a second caller waits, then reuses what the first cached.
exec 9>"$cache/build.lock"
flock 9

# --- 1. Debian root filesystem (cached) -------------------------------------------------
# Docs, man pages and translations are dropped: nothing reads them in a container.
mm_opts=(--variant=minbase --include="$packages"
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*')
key="$(printf '%s\n' "$suite" "$mirror" "${mm_opts[@]}" | sha256sum | cut -c1-12)"
base="$cache/rootfs-$suite-$key.tar"
if [[ -f "$base" ]]; then
  echo "==> Debian $suite rootfs cached: $base"
else
  step "Debian $suite minbase rootfs with $packages (mmdebstrap; about 1 minute on 2 cores)"
  mmdebstrap --quiet --mode=root --format=tar "${mm_opts[@]}" "$suite" "$base.part" "$mirror"
  mv "$base.part" "$base"
  done_step
fi

# --- 2. wheels: our package and the pinned lock (cached by file name) -------------------
# The operator's distribution alone (operator/pyproject.toml): requirements.lock pins its runtime
# dependencies and nothing of loadgen's.
grep -v '^#' requirements.lock | grep . > "$out/requirements.image.txt"
step "wheels for Debian's CPython 3.11 (pip download, binary only: no sdist, no compiler)"
# pip takes a --platform literally: list every manylinux tag bookworm's glibc 2.36 runs.
platforms=(--platform any --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
for minor in $(seq 5 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
"$python" -m pip download --quiet --disable-pip-version-check --dest "$cache/wheels" \
  --only-binary=:all: --no-deps --implementation cp --python-version 3.11 --abi cp311 \
  "${platforms[@]}" \
  -r "$out/requirements.image.txt" "pip==$pip_version"
done_step

step "inferscale wheel (setuptools pinned as in the Dockerfile)"
if [[ ! -x "$cache/build-venv/bin/pip" ]]; then
  "$python" -m venv "$cache/build-venv"
  "$cache/build-venv/bin/pip" install --quiet --disable-pip-version-check setuptools==84.2.1 wheel
fi
rm -rf "$out/dist" "$out/src"
# A copy of the sources, so setuptools' build/ and egg-info land outside the work tree.
mkdir -p "$out/src"
cp -r operator/pyproject.toml operator/README.md operator/inferscale "$out/src/"
"$cache/build-venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --wheel-dir "$out/dist" "$out/src"
rm -rf "$out/src"
done_step

# --- 3. the image's filesystem -----------------------------------------------------------
bundle="$out/bundle"
layout="$out/oci"
rm -rf "$bundle" "$layout"
step "OCI layout $layout, tag $tag (umoci)"
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci unpack --image "$layout:$tag" "$bundle" >/dev/null
rootfs="$bundle/rootfs"
tar -C "$rootfs" -xf "$base"
done_step

step "venv /opt/inferscale: the pinned lock and our wheel, installed by Debian's python3 in a chroot"
mkdir -p "$rootfs/tmp/wheels"
cp "$cache"/wheels/*.whl "$out"/dist/*.whl "$out/requirements.image.txt" "$rootfs/tmp/wheels/"
chroot "$rootfs" /usr/bin/python3 -m venv --without-pip /opt/inferscale
# --no-deps installs exactly what is pinned; pip compiles the .pyc now, since a read-only
# root filesystem would not let Python write them at run time.
chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin /opt/inferscale/bin/python \
  "/tmp/wheels/pip-$pip_version-py3-none-any.whl/pip" install --quiet --disable-pip-version-check \
  --no-index --no-deps --no-cache-dir --find-links /tmp/wheels \
  -r /tmp/wheels/requirements.image.txt "/tmp/wheels/$(basename "$out"/dist/inferscale-*.whl)"
# `pip check`: the lock must hold every requirement of the wheel and of what it pins.
chroot "$rootfs" /opt/inferscale/bin/python "/tmp/wheels/pip-$pip_version-py3-none-any.whl/pip" \
  check --disable-pip-version-check || { echo "image: pip check failed" >&2; exit 1; }
rm -rf "$rootfs/tmp/wheels"

# A named user (kopf asks the OS who runs it when POD_ID is unset), no home but /tmp.
echo "inferscale:x:$uid:$uid:inferscale operator:/tmp:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
echo "inferscale:x:$uid:" >>"$rootfs/etc/group"
echo "inferscale:!:1::::::" >>"$rootfs/etc/shadow"
# Empty and world-writable with the sticky bit, as on any Debian; the chart mounts an
# emptyDir here, the only writable place under readOnlyRootFilesystem.
rm -rf "${rootfs:?}"/tmp/* "${rootfs:?}"/var/cache/apt/* "${rootfs:?}"/var/lib/apt/lists/*
chmod 1777 "$rootfs/tmp"
done_step

step "layer and config: user $uid, entrypoint inferscale, cmd operator run"
umoci repack --image "$layout:$tag" "$bundle"
# Same entry point and default command as the Dockerfile; the chart passes its own args.
umoci config --image "$layout:$tag" \
  --config.user="$uid:$uid" \
  --config.entrypoint=inferscale \
  --config.cmd=operator --config.cmd=run --config.cmd=--liveness=http://0.0.0.0:8080/healthz \
  --config.env=PATH=/opt/inferscale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env=HOME=/tmp --config.env=PYTHONDONTWRITEBYTECODE=1 --config.env=PYTHONUNBUFFERED=1 \
  --config.workingdir=/tmp \
  --config.exposedports=8080/tcp --config.exposedports=8081/tcp \
  --config.label=org.opencontainers.image.title=inferscale \
  --config.label=org.opencontainers.image.version="$tag"
umoci gc --layout "$layout"
rm -rf "$bundle"
archive="$out/inferscale-$tag.oci.tar"
tar -C "$layout" -cf "$archive" .
done_step

echo "image: $archive ($(du -m "$archive" | cut -f1) MB; layout $layout:$tag) in $(since "$t_all")s"
