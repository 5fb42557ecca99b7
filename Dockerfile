# The inferscale operator image: `docker build -t <registry>/inferscale:0.1.0 .`
# On machines without Docker or a reachable python:3.11-slim, `make image` (image/build.sh)
# builds the same image from Debian's python3 (mmdebstrap, umoci): same venv path, user,
# entry point and command; tests/image and tests/e2e/test_image.py check and run that one.
# Only the operator's distribution (operator/pyproject.toml) goes in: no loadgen, none of its dependencies.
# Runs as a non-root user on a read-only root filesystem (the Helm chart mounts /tmp as an
# emptyDir); the entry point is the same `inferscale operator run` the tests run.

# --- build: the pinned dependencies and our wheel, into a venv ------------------------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first: this layer changes only with the lock file. --no-deps installs
# exactly what is pinned; `pip check` fails the build if the lock misses a dependency.
COPY requirements.lock ./
RUN python -m venv /opt/inferscale \
 && /opt/inferscale/bin/pip install --no-deps --require-virtualenv -r requirements.lock \
 && /opt/inferscale/bin/pip check
# Our own package, built with a pinned setuptools in a throwaway venv.
COPY operator/pyproject.toml operator/README.md ./
COPY operator/inferscale/ inferscale/
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install setuptools==84.2.1 \
 && /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /dist . \
 && /opt/inferscale/bin/pip install --no-deps /dist/inferscale-*.whl \
 && /opt/inferscale/bin/pip check \
 && /opt/inferscale/bin/pip uninstall --yes pip setuptools

# --- runtime: the venv only, no compilers, no pip --------------------------------------------
FROM python:3.11-slim
# A named user (kopf asks the OS who runs it) with a fixed UID the chart's runAsUser matches.
RUN groupadd --gid 10001 inferscale \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin inferscale
COPY --from=build /opt/inferscale /opt/inferscale
ENV PATH=/opt/inferscale/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 10001:10001
# kopf's liveness endpoint (--liveness) and the operator's metrics (INFERSCALE_METRICS_PORT).
EXPOSE 8080 8081
ENTRYPOINT ["inferscale"]
CMD ["operator", "run", "--liveness=http://0.0.0.0:8080/healthz"]
