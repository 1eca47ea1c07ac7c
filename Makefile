# weir: every target bootstraps .venv from nothing on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv system-deps demo test test-tiers test-fast test-integration test-cluster test-soak \
	check lint types docs-if-any bench bench-s3 bench-backfill bench-cluster soak compose-check clean

venv: $(STAMP)

# every install takes its versions from constraints.txt, so a run here is a run in CI
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,spark]'
	touch $(STAMP)

# Debian's packages the tests use: Chromium (the dashboard's browser test), docker-compose
# (validating docker-compose.yml; no Docker engine is needed for that), openssl (the Kafka
# TLS tests' CA and certificates) and a Java 17 runtime (Spark: the backfill's local session
# and the standalone test cluster)
system-deps:
	@{ command -v chromium && command -v docker-compose && command -v openssl && \
	  command -v java; } >/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install \
	  -y -qq --no-install-recommends chromium docker-compose openssl openjdk-17-jre-headless; }

demo: $(STAMP)
	$(BIN)/weir demo

# The suite in tiers (markers applied by folder and fixture, tests/support/tiers.py): fast (unit,
# property, contract: no process, no server), integration (real processes on loopback), cluster
# (the Spark standalone cluster, S3), soak (a leak check). `make test` runs them in that order
# and stops at the first that fails. The process tiers run on pytest-xdist workers: they wait on
# subprocesses and sockets more than they compute, so more workers than cores pay; the fast tier
# computes, and runs in one process (the numbers: docs/decisions/0005-test-tiers.md). A tier's
# *_WORKERS=0 runs it in one process; PYTEST_ARGS adds options to every tier; JUNIT_DIR=DIR
# writes each tier's JUnit XML there.
PYTEST := $(BIN)/python -m pytest -q
FAST_WORKERS ?= 0
INTEGRATION_WORKERS ?= 4
CLUSTER_WORKERS ?= 2
# $(call tier,NAME,WORKERS): one tier; pytest's exit 5 (no test selected) counts as a pass, so an
# empty tier (say, with -k) never fails the run
tier = @start=$$(date +%s); \
	$(PYTEST) -m $(1) $(if $(filter-out 0,$(2)),-n $(2) --dist loadgroup) \
	$(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/$(1).xml) $(PYTEST_ARGS); \
	rc=$$?; echo "weir tests: tier $(1) took $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	[ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# what CI runs (.ci/run), failing fast: lint, types, the docs build when there is one, the tiers
test: lint types docs-if-any test-tiers

test-tiers: $(STAMP) system-deps
	$(call tier,fast,$(FAST_WORKERS))
	$(call tier,integration,$(INTEGRATION_WORKERS))
	$(call tier,cluster,$(CLUSTER_WORKERS))
	$(call tier,soak,0)

test-fast: $(STAMP)
	$(call tier,fast,$(FAST_WORKERS))

test-integration: $(STAMP) system-deps
	$(call tier,integration,$(INTEGRATION_WORKERS))

test-cluster: $(STAMP) system-deps
	$(call tier,cluster,$(CLUSTER_WORKERS))

test-soak: $(STAMP)
	$(call tier,soak,0)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

check: test

docs-if-any:
	@if [ -f mkdocs.yml ]; then $(MAKE) docs; fi

# the peer in make bench's comparison, in its own venv so its pins never meet weir's (with
# -c constraints.txt, pip finds no versions that satisfy both)
QUIX := .bench-venvs/quix
$(QUIX)/.installed:
	test -x $(QUIX)/bin/python || $(PYTHON) -m venv $(QUIX)
	$(QUIX)/bin/python -m pip install --quiet quixstreams==3.28.0
	touch $@

bench: $(STAMP) $(QUIX)/.installed system-deps
	@command -v wrk >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends wrk; }
	$(BIN)/python -m benchmarks.bench

# checkpoints to S3 (SeaweedFS on loopback, from the dev extras) beside a local directory; also a
# section of make bench
bench-s3: $(STAMP)
	$(BIN)/python -m benchmarks.s3_bench

bench-backfill: $(STAMP)
	$(BIN)/python -m benchmarks.backfill_bench

# cluster mode on a standalone Spark cluster on loopback (two one-core workers, Java from
# system-deps) beside local runs; also a section of make bench
bench-cluster: $(STAMP) system-deps
	$(BIN)/python -m benchmarks.cluster_bench

soak: $(STAMP)
	$(BIN)/python -m benchmarks.soak --minutes 30

# the file has no default token; a placeholder lets config check the rest of it
compose-check: system-deps
	WEIR_API_TOKEN=$${WEIR_API_TOKEN:-placeholder} docker-compose -f docker-compose.yml config -q \
	  && echo "docker-compose.yml is valid"

clean:
	rm -rf $(VENV) .bench-venvs .pytest_cache .mypy_cache .ruff_cache .weir
