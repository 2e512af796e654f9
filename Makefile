# numalab: two commands on a fresh machine with Python 3.11+:
#   make book   # set up .venv, execute the notebooks, render _build/html
#   make test   # set up .venv, run the test suite (what .ci/run runs)
# Re-running is cheap: .venv is reinstalled only when pyproject.toml changes
# (the stamp file .venv/.installed), and the book is incremental.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BUILD_ARGS ?=
PYTEST_ARGS ?=
# Two test processes (this project's machines have 2 cores; idle ones steal queued
# tests from busy ones); the tests that
# read the quick book share one build (tests/conftest.py).
PYTEST_XDIST ?= -n 2 --dist worksteal

.PHONY: all book test test-fast lab clean distclean

all: book

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(VENV): $(STAMP)

book: $(STAMP)
	$(BIN)/numalab build $(BUILD_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The suite without the book builds and the browser (a few seconds).
test-fast: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m 'not slow' $(PYTEST_ARGS)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

# Build outputs and caches; keeps .venv.
clean:
	rm -rf _build book/notebooks .numalab-cache

# Everything `make` created, .venv included.
distclean: clean
	rm -rf $(VENV)
