# Setup on a fresh machine: `make serve` or `make test` create .venv from pyproject.toml.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# pytest-xdist workers for `make unit`: the suite is CPU-bound and CI has two cores, so two;
# more only share those cores and stretch the tests that wait on a clock.
TEST_WORKERS ?= 2

.PHONY: serve test check lint layers typecheck unit docs bench load clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Stamp files: reinstall only when pyproject.toml changes.
$(VENV)/.installed-server: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[server,exact]'
	$(BIN)/planner warm
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[server,exact,dev,mlir,triton]'
	$(BIN)/planner warm
	touch $@ $(VENV)/.installed-server

serve: $(VENV)/.installed-server
	$(BIN)/planner serve --host $(HOST) --port $(PORT)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The one-way import layers (pyproject.toml, [tool.importlinter]): an upward import fails.
layers: $(VENV)/.installed-dev
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# The whole suite, slow tests included, on TEST_WORKERS processes (`python -m pytest FILE`
# runs one file in this process). loadfile: a module's tests run on one worker, so its
# server, browser or installed environments are built once; the modules go out longest
# first (tests/conftest.py), not by xdist's count of tests.
unit: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

check: lint layers typecheck

# The documentation site from docs/ (MkDocs): strict, so a broken link or anchor fails.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: check docs unit

bench: $(VENV)/.installed-dev
	$(BIN)/planner bench benchmarks/minimalloc/[A-F].1048576.csv --capacity 1048576

# Loopback load test on a fresh server: p50, p99, throughput and errors against the targets.
load: $(VENV)/.installed-server
	$(BIN)/python scripts/load.py

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
