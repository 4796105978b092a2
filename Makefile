# make demo / make test / make bench work from a fresh clone: each creates .venv if missing and installs what it
# needs (re-installing only when pyproject.toml changed), then runs. The test and bench extras pull
# sentence-transformers, hence torch: the CPU build torch==2.13.0 is installed first, or pip would fetch a
# multi-GB CUDA build.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test test-unit bench lint notebooks clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	@touch $@

TORCH := torch==2.13.0

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) install $(TORCH)
	$(PIP) install -e '.[test]'
	@touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(PIP) install $(TORCH)
	$(PIP) install -e '.[test,bench]'
	@touch $@

demo: $(VENV)/.installed-core
	$(BIN)/ragspine demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

# without the integration tests (PostgreSQL, standard suites, LangGraph CLI, docs, shared data): see the markers in
# pyproject.toml
test-unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m "not integration"

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/quality.py
	$(BIN)/python benchmarks/speed.py
	$(BIN)/python benchmarks/hybrid_speed.py

# re-executes notebooks/walkthrough.ipynb (offline: run it without RAGSPINE_LLM) and saves its outputs in place
notebooks: $(VENV)/.installed-test
	$(BIN)/python notebooks/execute.py

lint: $(VENV)/.installed-test
	$(PIP) install ruff mypy
	$(BIN)/ruff check langchain_ragspine tests benchmarks graphs
	$(BIN)/mypy langchain_ragspine tests/typing

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
