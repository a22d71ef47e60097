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

# System tools the two commands need, found where tracecheck and the tests look for them; a
# machine without them stops here with the command that installs them (`make deps` runs it).
APT_DEPS := default-jdk-headless etcd-server
SUDO := $(if $(filter 0,$(shell id -u)),,sudo )
DEPS_HINT := run 'make deps', which runs '$(SUDO)apt-get install -y $(APT_DEPS)'
JAVA_BIN = $(or $(JAVA),$(if $(JAVA_HOME),$(JAVA_HOME)/bin/java),$(shell command -v java))
JAVAC_BIN = $(or $(if $(JAVA_HOME),$(wildcard $(JAVA_HOME)/bin/javac)),$(shell command -v javac))
ETCD_BIN = $(or $(PROTOREF_ETCD),$(wildcard /usr/bin/etcd),$(shell command -v etcd))

.PHONY: need-java
need-java:
	@test -n "$(JAVA_BIN)" && "$(JAVA_BIN)" -version >/dev/null 2>&1 || { \
	  echo "TLC needs Java 11+, and none was found (JAVA, JAVA_HOME, PATH): $(DEPS_HINT)" >&2; exit 1; }

.PHONY: need-test-tools
need-test-tools: need-java
	@test -n "$(JAVAC_BIN)" || { echo "the tests compile tracecheck's trace reader with javac (a JDK, not a JRE): $(DEPS_HINT)" >&2; exit 1; }
	@test -n "$(ETCD_BIN)" && test -x "$(ETCD_BIN)" || { \
	  echo "the etcd store's tests run etcd 3.4+ (PROTOREF_ETCD, /usr/bin/etcd, PATH): $(DEPS_HINT)" >&2; exit 1; }

.PHONY: deps
deps: ## install the system tools: a JDK (TLC, the trace reader) and etcd (tests), with apt-get
	@command -v apt-get >/dev/null || { echo "no apt-get: install a JDK 11+ and etcd 3.4+ with your system's package manager" >&2; exit 1; }
	$(SUDO)apt-get update -qq
	$(SUDO)env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_DEPS)

TORCH_STAMP := $(VENV)/.torch-stamp
$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[torch]'
	@touch $@

.PHONY: torch
torch: $(TORCH_STAMP) ## add torch 2.13 (CPU): the torchrun backend's tests run real torchrun agents

.PHONY: check
check: need-java setup ## the main job: every quick TLC model against the manifest, then the conformance campaigns (RRef, rendezvous, autograd, torch 2.13's handler)
	$(TRACECHECK) check
	$(TRACECHECK) campaign rref --runs 20 --seed 1 --invariants
	$(TRACECHECK) campaign rendezvous --runs 50 --seed 1 --steps 150 --invariants
	$(TRACECHECK) campaign autograd --runs 20 --seed 1 --steps 150 --invariants
	@# torch 2.13's own handler (exit 3: torch absent or not 2.13; make test installs it)
	$(TRACECHECK) campaign torch-rendezvous --runs 30 --seed 1 || { test $$? = 3 && \
	  echo "== make check skipped the torch-rendezvous campaign: no torch 2.13 in $(VENV) (make test installs it)"; }

.PHONY: test
test: need-test-tools setup torch lint ## lint, type-check, then run the test suite (real TLC runs, real torchrun)
	$(BIN)/pytest

.PHONY: lint
lint: setup ## ruff and mypy --strict on impl/, conformance/ and the spec folders' scripts
	$(BIN)/ruff check impl conformance tests spec benches examples
	$(BIN)/ruff format --check impl conformance tests spec benches examples
	$(BIN)/mypy impl/protoref conformance/tracecheck benches examples $(wildcard spec/*/*.py)

.PHONY: conformance
conformance: setup ## a larger conformance campaign: 200 seeded RRef runs through the checker
	$(TRACECHECK) campaign rref --runs 200 --seed 1 --steps 200 --out traces/rref

.PHONY: bench
bench: setup torch ## deep models vs TLC's ceiling, trace validation, RRef simulator and runtime, rendezvous vs torch 2.13 -> docs/performance.md
	$(TRACECHECK) bench --workers auto
	$(BIN)/python -m benches.rref_sim --out docs/performance.md
	$(BIN)/python -m benches.rref_runtime --out docs/performance.md
	$(BIN)/python -m protoref.rendezvous.bench --out docs/performance.md
	$(BIN)/python -m benches.autograd --out docs/performance.md

.PHONY: docs
docs: setup ## regenerate the generated parts of docs/ (model and teeth tables, RRef diagrams, autograd steps)
	$(TRACECHECK) docs
	$(BIN)/python spec/rref/gen_rref_docs.py
	$(BIN)/python spec/autograd/gen_autograd_docs.py
	$(BIN)/python spec/autograd/render_autograd_cex.py --write

.PHONY: clean
clean: ## remove the venv, caches and TLC leftovers
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find spec tests -type d \( -name states -o -name gen \) -prune -exec rm -rf {} +
	find spec tests -name '*_TTrace_*' -delete
