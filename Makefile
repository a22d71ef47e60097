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

.PHONY: check
check: setup ## the main job: every quick TLC model against the manifest, then an RRef conformance campaign
	$(TRACECHECK) check
	$(TRACECHECK) campaign rref --runs 20 --seed 1 --invariants
	$(TRACECHECK) campaign rendezvous --runs 50 --seed 1 --steps 150 --invariants

.PHONY: test
test: setup lint ## lint, type-check, then run the test suite (real TLC runs)
	$(BIN)/pytest

.PHONY: lint
lint: setup ## ruff and mypy --strict on impl/, conformance/ and the spec folders' scripts
	$(BIN)/ruff check impl conformance tests spec
	$(BIN)/ruff format --check impl conformance tests spec
	$(BIN)/mypy impl/protoref conformance/tracecheck $(wildcard spec/*/*.py)

.PHONY: conformance
conformance: setup ## a larger conformance campaign: 200 seeded RRef runs through the checker
	$(TRACECHECK) campaign rref --runs 200 --seed 1 --steps 200 --out traces/rref

.PHONY: bench
bench: setup ## deep models vs TLC's ceiling, trace validation, RRef simulator and runtime, rendezvous vs torch 2.13 -> docs/performance.md
	$(TRACECHECK) bench --workers auto
	$(BIN)/python -m protoref.rref.bench --out docs/performance.md
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'torch==2.13.0' numpy
	$(BIN)/python -m protoref.rref.runtime.bench --out docs/performance.md
	$(BIN)/python -m protoref.rendezvous.bench --out docs/performance.md

.PHONY: docs
docs: setup ## regenerate the generated parts of docs/ (model tables)
	$(TRACECHECK) docs

.PHONY: clean
clean: ## remove the venv, caches and TLC leftovers
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find spec tests -type d \( -name states -o -name gen \) -prune -exec rm -rf {} +
	find spec tests -name '*_TTrace_*' -delete
