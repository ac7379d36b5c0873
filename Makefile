# The two entry points a fresh machine needs (see README.md):
#   make demo   bring up the local cluster (kwok + real control plane + JobSet), install the Trainer API and
#               default runtimes, start trainer-controller-manager, and watch a sample TrainJob reach Complete
#   make test   everything CI runs: lint, types, layer contracts, unit, integration and e2e tests, then the
#               e2e suite again on a kind cluster with real Pods (KIND=0 leaves that tier out)
#
# Control-plane binaries are built from pinned Go modules by hack/build-binaries.sh and cached by version
# outside the repository, so only the first run pays for the build.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test venv binaries cluster-binaries lint typecheck contracts unit integration e2e bench fuzz bench-scale soak cluster-up cluster-down cluster-env kind-up kind-down e2e-kind clean
KIND ?= 1

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

binaries:
	bash hack/build-binaries.sh >/dev/null

# What the local cluster needs; the demo does not wait for Helm, Kueue or upstream's controller (tests only).
cluster-binaries:
	bash hack/build-binaries.sh etcd kubernetes kwok jobset >/dev/null

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

contracts: venv
	$(VENV)/bin/lint-imports

unit: venv
	$(PY) -m pytest test/unit $(PYTEST_ARGS)

integration: venv binaries
	$(PY) -m pytest test/integration $(PYTEST_ARGS)

e2e: venv binaries
	$(PY) -m pytest test/e2e $(PYTEST_ARGS)

# One pytest run for all tiers, so the Tier 1 control plane starts once and pytest reports one summary.
# TRAINER_REQUIRE_CLUSTER=1: a missing prerequisite (Go, the module proxy, third-party CRDs) fails the run
# instead of skipping the integration and e2e tiers (test/conftest.py; CI=true implies it too).
test: venv binaries lint typecheck contracts
	TRAINER_REQUIRE_CLUSTER=1 $(PY) -m pytest test $(PYTEST_ARGS)
ifneq ($(KIND),0)
	bash hack/e2e-setup-kind.sh ci
endif

bench: venv binaries
	$(PY) -m pytest test -m benchmark -s -p no:cacheprovider $(PYTEST_ARGS)

# Hostile input at full strength: 10,000 seeded examples per property (`make unit` runs 60); replay a
# failure with TRAINER_FUZZ_SEED=<seed> make fuzz.
FUZZ_EXAMPLES ?= 10000
fuzz: venv
	TRAINER_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest test/unit/fuzz -p no:cacheprovider --timeout=7200 --durations=0 $(PYTEST_ARGS)

# The reliability scenarios at full length and repeated (test/reliability, marker `soak`): each prints its
# figures (runs, faults injected, objects lost and duplicated, failover times, requests while backing off).
soak: venv binaries
	$(PY) -m pytest test/reliability -m soak -s -p no:cacheprovider --timeout=3600 $(PYTEST_ARGS)

# Our controller and upstream's Go controller side by side at scale, with the micro benchmarks above as one
# step (test/benchmark/scale, run by hack/bench_scale.py; about 40 min on 2 cores; not part of `make test`):
# the table on stdout, JSON and PNG plots into docs/performance/. BENCH_ARGS=--quick for a smoke run (into build/bench-scale-quick/).
bench-scale: venv binaries
	$(PY) -c 'import matplotlib' 2>/dev/null || $(VENV)/bin/pip install --quiet -e '.[bench]'
	$(PY) hack/bench_scale.py $(BENCH_ARGS)

demo: venv cluster-binaries
	$(PY) hack/cluster.py demo

cluster-up: venv cluster-binaries
	$(PY) hack/cluster.py up

cluster-down: venv
	$(PY) hack/cluster.py down

cluster-env: venv
	@$(PY) hack/cluster.py env

# The kind tier (hack/e2e-setup-kind.sh, docs/development.md): a Docker engine (installed and started when
# none answers), kind and its node image built here, JobSet, and this manager installed by Helm.
# kind-up prints the exports that point kubectl and the suite at it; e2e-kind runs test/e2e there.
kind-up: venv
	@bash hack/e2e-setup-kind.sh up

kind-down:
	bash hack/e2e-setup-kind.sh down

e2e-kind: venv
	bash hack/e2e-setup-kind.sh test

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
