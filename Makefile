# inferscale: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: help deps deps-demo install lint crd lock image helm cluster-up cluster-down engines-up engines-down operator-up operator-down test test-unit test-integration demo down

help:
	@echo "make demo         local cluster + operator + an example InferenceService, shown with kubectl"
	@echo "make test         everything: lint, unit tests, end-to-end tests on the local cluster"
	@echo "make test-unit    the fast tests only (no server, no cluster; under a minute)"
	@echo "make test-integration  the tests against real servers on loopback (Prometheus, simengines)"
	@echo "make down         stop the demo's operator and the local cluster"
	@echo "make helm         build the pinned helm (the chart's tests need it; make test builds it)"
	@echo "make crd          regenerate crds/ (and the Helm chart's copy) and docs/reference.md from the models"
	@echo "make image        build the operator's OCI image without Docker (build/image/, needs root)"
	@echo "make lock         re-pin the container image's dependencies (requirements.lock)"

$(VENV)/.installed: pyproject.toml operator/pyproject.toml
	@PYTHON=$(PYTHON) bash cluster/deps.sh venv
	@bash cluster/progress.sh venv "installing the Python environment in $(VENV) with pip" \
	  sh -c '$(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e ./operator -e ".[dev]"'
	touch $@

install: $(VENV)/.installed

# The Debian packages each command needs and the machine lacks (cluster/deps.sh says which).
deps-demo:
	@bash cluster/deps.sh demo

deps:
	@bash cluster/deps.sh test

lint: install
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy
	$(BIN)/inferscale crd generate --check
	$(BIN)/inferscale docs generate --check

crd: install
	$(BIN)/inferscale crd generate
	$(BIN)/inferscale docs generate

# The image's pinned runtime dependencies: what `pip install ./operator` (the operator alone) resolves in a fresh venv.
lock:
	@PYTHON=$(PYTHON) bash cluster/deps.sh venv
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install -q ./operator
	{ sed -n '/^#/p' requirements.lock; build/lock-venv/bin/pip freeze --exclude inferscale; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf build/lock-venv

# The operator's OCI image, from Debian's python3 and the pinned lock (image/build.sh).
image: deps install
	PYTHON=$(BIN)/python bash image/build.sh

# The chart's tests (tests/project/test_chart.py, tests/e2e/test_chart.py) run the pinned helm;
# the demo never does, so only `make test` builds it.
helm:
	bash cluster/build.sh helm

cluster-up:
	bash cluster/up.sh

cluster-down:
	bash cluster/down.sh

engines-up: deps-demo install cluster-up
	bash cluster/prometheus.sh start
	bash cluster/engines.sh start

engines-down:
	bash cluster/engines.sh stop
	bash cluster/prometheus.sh stop

operator-up: install cluster-up
	bash cluster/operator.sh start

operator-down:
	bash cluster/operator.sh stop

# tests/ mirrors the packages. The fast suite: no server, no cluster, under a minute. The rest need real
# servers on loopback (integration: Prometheus, simengine processes), the cluster (e2e) or the image (image).
FAST_TESTS := tests/operator tests/loadgen tests/harness tests/project tests/bench

test-unit: install
	$(BIN)/pytest $(FAST_TESTS)

test-integration: deps-demo install
	$(BIN)/pytest tests/integration

# The image too: tests/image checks what is in it, tests/e2e/test_image.py runs it. Helm
# before cluster-up, which puts it on the cluster's PATH (cluster/env.sh). The demo's operator,
# if `make demo` left it running, is stopped: it would fight the tests' own over every object.
test: deps install lint image helm operator-down cluster-up
	source cluster/env.sh && time $(BIN)/pytest tests

demo: deps-demo install cluster-up
	bash cluster/demo.sh

down: operator-down cluster-down
