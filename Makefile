# weir: every target bootstraps .venv from nothing on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv browser demo test check lint types bench bench-backfill clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Debian's Chromium, for the dashboard's browser test
browser:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }

demo: $(STAMP)
	$(BIN)/weir demo

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

check: lint types test

bench: $(STAMP)
	@command -v wrk >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends wrk; }
	$(BIN)/python -m loadtest.bench

bench-backfill: $(STAMP)
	$(BIN)/python -m loadtest.backfill_bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .weir
