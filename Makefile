# Phalanx developer commands. `make help` lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
EXTRAS ?= operator,trainer,storage,cli,api
PYTEST_ARGS ?=
SETUP ?= venv# prerequisite of the targets that run Python; `make SETUP= ...` skips it

##@ Setup

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q -e ".[$(EXTRAS)]" --group dev
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv with Phalanx (editable) and the test and lint tools

# The oldest torch the resume library supports (phalanx.resume.compat.TORCH_FLOOR, pyproject's
# `torch>=` bound): a second environment with it, for the resume library's tests.
TORCH_FLOOR := $(shell sed -n 's/^  "torch>=\([0-9.]*\)".*/\1/p' pyproject.toml)
FLOOR_VENV ?= .venv-torch-floor

$(FLOOR_VENV)/.installed: pyproject.toml
	python3 -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/pip install -q -U pip
	$(FLOOR_VENV)/bin/pip install -q -e ".[trainer,cli]" --group test "torch==$(TORCH_FLOOR).0"
	touch $@

.PHONY: venv-torch-floor
venv-torch-floor: $(FLOOR_VENV)/.installed ## Create .venv-torch-floor: Phalanx with the oldest torch it supports

QUICKSTART := deploy/examples/quickstart.yaml --fresh --kill-node-at step:60

.PHONY: quickstart
quickstart: venv ## Install, then run the quickstart on this machine with a node killed at step 60
	$(VENV)/bin/phalanx run $(QUICKSTART)

.PHONY: binaries
binaries: ## Build the pinned kube-apiserver, kubectl, etcd and promtool into ~/.cache/phalanx (once)
	bash tests/tools/k8s-binaries.sh

# The web page's test drives Debian's chromium through its chromedriver (no browser download).
.PHONY: browser
browser: ## Install headless Chromium and its driver from Debian, if missing (for the web-page test)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null; }

##@ Lint

.PHONY: lint
lint: $(SETUP) ## ruff lint + format check, and the import-linter layer contracts
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

.PHONY: format
format: ## Format and auto-fix with ruff
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

.PHONY: typecheck
typecheck: $(SETUP) ## mypy --strict over the packages and tests
	$(PYTHON) -m mypy

##@ Test

.PHONY: test
test: $(SETUP) binaries browser ## Set up if needed, then run every test (unit + integration, real API server)
	$(PYTHON) -m pytest $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: $(SETUP) ## Run the tests that need no API server
	$(PYTHON) -m pytest -m "not integration and not e2e" $(PYTEST_ARGS)

# The resume library's tests (not the reference trainer's, which ships with its image's torch),
# with the oldest torch it supports. torch 2.9's own DCP writer warns that TypedStorage is
# deprecated (filesystem.py); that warning is torch's, not ours, so it is not an error here.
FLOOR_TESTS := tests/unit/test_torch_floor.py tests/unit/test_checkpoint_cadence.py \
	tests/unit/test_snapshot_cadence.py tests/trainer/test_checkpoint.py \
	tests/trainer/test_checkpoint_failing.py tests/trainer/test_checkpoint_from_snapshot.py \
	tests/trainer/test_memory_agreement.py tests/trainer/test_memory_snapshots.py \
	tests/trainer/test_save_reporting.py tests/trainer/test_snapshot_budget.py \
	tests/trainer/test_snapshot_plan.py tests/trainer/test_snapshot_prepare.py \
	tests/trainer/test_snapshot_state.py tests/local/test_resume_library.py

.PHONY: test-torch-floor
test-torch-floor: venv-torch-floor ## Run the resume library's tests with the oldest torch it supports
	$(FLOOR_VENV)/bin/python -c 'import torch; print("torch", torch.__version__)'
	$(FLOOR_VENV)/bin/python -m pytest $(FLOOR_TESTS) \
		-W "ignore:TypedStorage is deprecated:UserWarning" $(PYTEST_ARGS)

.PHONY: test-gpu
test-gpu: $(SETUP) ## Run the checks that need a CUDA device (tests/gpu), where there is one
	$(PYTHON) -m pytest tests/gpu -m gpu $(PYTEST_ARGS)

.PHONY: test-stress
test-stress: $(SETUP) ## Run the local and trainer suites with one core kept busy beside them
	bash tests/tools/with-cpu-hog.sh $(PYTHON) -m pytest tests/local tests/trainer $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: $(SETUP) binaries browser ## Run the tests against the real kube-apiserver + etcd
	$(PYTHON) -m pytest -m integration $(PYTEST_ARGS)

.PHONY: apiserver
apiserver: $(SETUP) binaries ## Start a local kube-apiserver + etcd with the CRD installed (Ctrl-C stops)
	$(PYTHON) -m harness.controlplane --dir .artifacts/apiserver

##@ Generate

.PHONY: generate
generate: $(SETUP) ## Regenerate the CRD (deploy/ and the chart) from the models, and deploy/'s render
	$(PYTHON) -m phalanx.models.crdgen
	bash tests/tools/render-deploy.sh

.PHONY: verify-generated
verify-generated: $(SETUP) ## Fail if the generated CRD files differ from the models
	$(PYTHON) -m phalanx.models.crdgen --check

##@ Chart

# Where tests/tools/cluster-tools.sh builds helm (tools/bin) and its plugins (helm/plugins).
HELM_TOOLS = $(shell bash tests/tools/cluster-tools.sh --print-dir)
HELM = $(HELM_TOOLS)/helm
HELM_PLUGINS_DIR = $(abspath $(HELM_TOOLS)/../../helm/plugins)
CHART := charts/phalanx

.PHONY: chart-tools
chart-tools: ## Build the pinned helm and the helm-unittest plugin into ~/.cache/phalanx (once)
	bash tests/tools/cluster-tools.sh helm helm-unittest

.PHONY: chart-lint
chart-lint: chart-tools ## helm lint + helm-unittest suites + the deploy/ drift check
	$(HELM) lint --strict $(CHART)
	HELM_PLUGINS=$(HELM_PLUGINS_DIR) $(HELM) unittest $(CHART)
	bash tests/tools/render-deploy.sh --check

.PHONY: deploy-render
deploy-render: ## Regenerate deploy/manifests/phalanx.yaml and the chart's dashboard copy
	bash tests/tools/render-deploy.sh

##@ Cluster (kind)

KIND_WORKERS ?= 3
E2E_ARGS ?=

.PHONY: kind-up
kind-up: $(SETUP) ## Create the kind cluster (offline node image when no registry answers), images loaded
	bash tests/tools/kind.sh up --workers $(KIND_WORKERS)

.PHONY: e2e
e2e: kind-up chart-tools ## kind-up, then the end-to-end suite on real pods (tests/e2e)
	$(PYTHON) -m pytest tests/e2e -m "e2e and not soak" $(E2E_ARGS)

# What CI runs on kind: one case for each path that only a real cluster can show, so that a cold
# CI on a slow machine stays well inside its 90 minutes (the 43 cases CI used to run took 41 min
# on a normal machine and did not finish on a slower one, after a 45-minute tests phase; these 14
# took 11 min 50 s on that slower kind of machine).
# The chart (rendered objects the API server accepts, `helm test`, no Secret access, the
# uninstall), the quickstart through kubectl, a worker killed, a node lost, a silent node found
# by its peers (a spare takes its rank), an OOM kill by the kernel, a user's image with and
# without Python, a job with a spare under the restricted Pod Security level, and the standby
# operator taking over from a frozen leader; a platform team's first day (issue 53): mistakes
# named in conditions (about 45 s), the dashboard's queries against a real Prometheus scraping
# as the ServiceMonitor says (about 30 s, and 21 s to build Prometheus beside promtool), a job
# checkpointing to an S3 server in the cluster that loses a node (about 3 min, and 88 s to build
# versitygw cold). `make e2e` runs the other cases (Kueue, the gang scheduler, drains, the
# third-party programs, the rest of the fault matrix).
E2E_REDUCED := renders or helm_test or secrets or every_example_is_run or quickstart or worker-killed or node-lost or silent_node or oom_killed or users_image_gets_the_agent or without_python or restricted_namespace or standby_operator or named_causes or test_monitoring or test_object_storage or uninstall

.PHONY: e2e-reduced
e2e-reduced: kind-up chart-tools ## What CI runs on kind: the chart, one job, one case per cluster-only path
	$(PYTHON) -m pytest tests/e2e -m "e2e and not soak" -k "$(E2E_REDUCED)" $(E2E_ARGS)

MINUTES ?= 30
.PHONY: soak
soak: kind-up chart-tools ## Chaos soak on kind: random faults for MINUTES (30), invariants checked, report in docs/soak.md
	PHALANX_SOAK_MINUTES=$(MINUTES) PHALANX_SOAK_REPORT=docs/soak.md \
		$(PYTHON) -m pytest tests/e2e/test_soak.py -m "e2e and soak" -s $(E2E_ARGS)

.PHONY: kind-down
kind-down: ## Delete the kind cluster
	bash tests/tools/kind.sh down

##@ Bench

# The control-plane benchmark also runs kube-scheduler and kwok (fake nodes), built once, cached.
.PHONY: bench-tools
bench-tools: binaries ## Build kube-scheduler, kwok and Kubeflow's training operator for the control-plane benchmark (once)
	bash tests/tools/k8s-binaries.sh kube-scheduler
	bash tests/tools/cluster-tools.sh kwok training-operator

.PHONY: bench
bench: $(SETUP) bench-tools ## Every benchmark, full mode (115 min on 2 cores): bench/results/suite/*.json and docs/benchmarks.md with plots
	$(PYTHON) -m bench --full

.PHONY: bench-quick
bench-quick: $(SETUP) bench-tools ## Every benchmark in about 11 min (quick mode): the same outputs, smaller figures
	$(PYTHON) -m bench --quick

.PHONY: bench-controlplane
bench-controlplane: $(SETUP) bench-tools ## Operator at scale: 200 jobs x 8 pods on the real API server, kube-scheduler and kwok, and a failure storm
	$(PYTHON) -m bench.controlplane.controlplane

.PHONY: bench-checkpoint
bench-checkpoint: $(SETUP) ## Training time blocked by an async vs a sync checkpoint save
	$(PYTHON) -W ignore -m bench.snapshot.checkpoint

.PHONY: bench-recovery
bench-recovery: $(SETUP) ## Local backend: time to recover from a killed node, goodput with failures
	$(PYTHON) -m bench.recovery.recovery

.PHONY: bench-api
bench-api: $(SETUP) binaries ## API service: list/get latency and req/s from its cache vs the kube API (1000 jobs)
	$(PYTHON) -m bench.api.api

##@ Help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} \
	  /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
