# inferscale: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: help deps install lint crd lock image cluster-up cluster-down engines-up engines-down operator-up operator-down test test-unit demo down

help:
	@echo "make demo         local cluster + operator + an example InferenceService, shown with kubectl"
	@echo "make test         everything: lint, unit tests, end-to-end tests on the local cluster"
	@echo "make test-unit    unit tests only (no cluster)"
	@echo "make down         stop the demo's operator and the local cluster"
	@echo "make crd          regenerate crds/ (and the Helm chart's copy) and docs/reference.md from the models"
	@echo "make image        build the operator's OCI image without Docker (build/image/, needs root)"
	@echo "make lock         re-pin the container image's dependencies (requirements.lock)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# System packages the tests use: openssl and curl (local cluster), Prometheus (Debian's),
# mmdebstrap and umoci (`make image`), podman and runc (tests/e2e/test_image.py runs the image).
deps:
	@missing=""; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v curl >/dev/null || missing="$$missing curl"; \
	[ -x /usr/bin/prometheus ] || missing="$$missing prometheus"; \
	command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	command -v umoci >/dev/null || missing="$$missing umoci"; \
	command -v podman >/dev/null || missing="$$missing podman"; \
	command -v runc >/dev/null || missing="$$missing runc"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

lint: install
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy
	$(BIN)/inferscale crd generate --check
	$(BIN)/inferscale docs generate --check

crd: install
	$(BIN)/inferscale crd generate
	$(BIN)/inferscale docs generate

# The image's pinned runtime dependencies: what `pip install .` resolves in a fresh venv.
lock:
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install -q .
	{ sed -n '/^#/p' requirements.lock; build/lock-venv/bin/pip freeze --exclude inferscale; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf build/lock-venv

# The operator's OCI image, from Debian's python3 and the pinned lock (image/build.sh).
image: deps install
	PYTHON=$(BIN)/python bash image/build.sh

cluster-up:
	bash cluster/up.sh

cluster-down:
	bash cluster/down.sh

engines-up: install cluster-up
	bash cluster/prometheus.sh start
	bash cluster/engines.sh start

engines-down:
	bash cluster/engines.sh stop
	bash cluster/prometheus.sh stop

operator-up: install cluster-up
	bash cluster/operator.sh start

operator-down:
	bash cluster/operator.sh stop

test-unit: install
	$(BIN)/pytest tests/unit

# The image too: tests/image checks what is in it, tests/e2e/test_image.py runs it.
test: deps install lint image cluster-up
	source cluster/env.sh && time $(BIN)/pytest tests

demo: install cluster-up
	bash cluster/demo.sh

down: operator-down cluster-down
