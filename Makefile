# weir: every target bootstraps .venv from nothing on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1
# bytecode is written (an empty value is unset): with PYTHONDONTWRITEBYTECODE set, as on CI's
# machines, every `weir` process, worker and pytest worker the suite starts compiled every module
# it imports again (a quarter of a CPU-second per weir process, 5 s per pytest collection)
export PYTHONDONTWRITEBYTECODE :=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv system-deps bytecode demo test test-tiers test-fast test-integration test-cluster test-soak \
	test-kernels check lint types arch sizes deadcode reference reference-check docs docs-serve \
	docs-if-any docstrings bench bench-cpu bench-s3 bench-backfill bench-cluster soak chaos \
	compose-check \
	clean

venv: $(STAMP)

# every install takes its versions from constraints.txt, so a run here is a run in CI
$(STAMP): pyproject.toml constraints.txt setup.py $(wildcard engine/kernels/*.pyx)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# the distribution was called weir before weir-stream (the PyPI name weir is another project)
	$(BIN)/python -m pip uninstall --quiet --yes weir 2>/dev/null || true
	@# the build's own requirements first, then no isolated build env: pip would otherwise
	@# fetch and install setuptools and Cython into a throwaway env for the editable build.
	@# --no-compile: pip would compile every module of every package, one at a time (16 s of a
	@# clean clone's 61); Python compiles the ones a process imports, once, on first import
	$(BIN)/python -m pip install --quiet -c constraints.txt setuptools Cython
	$(BIN)/python -m pip install --quiet --no-compile --no-build-isolation -c constraints.txt \
	  -e '.[dev,all]'
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

demo: $(STAMP) bytecode
	$(BIN)/weir demo

# The suite in tiers (markers applied by folder and fixture, tests/support/tiers.py): fast (unit,
# property, contract: no process, no server), integration (real processes on loopback), cluster
# (the Spark standalone cluster, S3), soak (a leak check). `make test` runs them in that order
# and stops at the first that fails; the soak's two tests run beside the cluster's (they mostly
# wait; the fastest of the arrangements decision 0008 measured). The process tiers run on pytest-xdist
# workers: they wait on
# subprocesses and sockets more than they compute, so more workers than cores pay; the fast tier
# computes, and runs on one worker per core (the numbers: docs/decisions/0008-test-tiers.md). A tier's
# *_WORKERS=0 runs it in one process; PYTEST_ARGS adds options to every tier; JUNIT_DIR=DIR
# writes each tier's JUnit XML there.
PYTEST := $(BIN)/python -m pytest -q
FAST_WORKERS ?= 2
INTEGRATION_WORKERS ?= 4
CLUSTER_WORKERS ?= 2
# $(call tier,NAME,WORKERS[,MARKERS]): one tier (MARKERS: a pytest -m expression, NAME by
# default); pytest's exit 5 (no test selected) counts as a pass, so an empty tier (say, with -k)
# never fails the run; with JUNIT_DIR, each test's CPU-seconds go to JUNIT_DIR/cpu-NAME/
tier = @start=$$(date +%s); \
	$(if $(JUNIT_DIR),WEIR_TEST_CPU=$(JUNIT_DIR)/cpu-$(1)) $(PYTEST) -m "$(or $(3),$(1))" $(if $(filter-out 0,$(2)),-n $(2) --dist loadgroup) \
	$(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/$(1).xml) $(PYTEST_ARGS); \
	rc=$$?; echo "weir tests: tier $(1) took $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	[ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# what CI runs (.ci/run), stopping at the first failure: the static checks (the style, the
# types, the import contract, the size limits, dead code, the generated pages' drift, the docs
# build when there is one, the kernel reference suites on the pure-Python twins), three at a time
# since none depends on another (mypy alone is a core for a minute on a clean clone), each one's
# output kept together; then the tiers, in order
STATIC_CHECKS := lint types arch sizes deadcode docstrings reference-check docs-if-any test-kernels
test: $(STAMP)
	@start=$$(date +%s); $(MAKE) --no-print-directory -j3 --output-sync=target $(STATIC_CHECKS); \
	rc=$$?; echo "weir tests: static checks took $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	[ $$rc -eq 0 ]
	@$(MAKE) --no-print-directory test-tiers

# weir's own modules compiled up front on every core, not by the first processes that import them
# (a .pyc older than its source is ignored, so an edit never runs stale code)
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 app api engine state tests benchmarks > /dev/null

test-tiers: $(STAMP) system-deps bytecode
	$(call tier,fast,$(FAST_WORKERS))
	$(call tier,integration,$(INTEGRATION_WORKERS))
	$(call tier,cluster+soak,$(CLUSTER_WORKERS),cluster or soak)

test-fast: $(STAMP) bytecode
	$(call tier,fast,$(FAST_WORKERS))

test-integration: $(STAMP) system-deps bytecode
	$(call tier,integration,$(INTEGRATION_WORKERS))

test-cluster: $(STAMP) system-deps bytecode
	$(call tier,cluster,$(CLUSTER_WORKERS))

test-soak: $(STAMP) bytecode
	$(call tier,soak,0)

# the kernel reference suites on the pure-Python twins alone (make test runs them on both
# implementations): what a machine without the compiled kernels runs
test-kernels: $(STAMP)
	WEIR_KERNELS=python $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/property/test_kernels_*.py tests/unit/test_columnar_loop.py \
	  tests/property/test_column_*.py tests/unit/test_columnar_choice.py \
	  tests/unit/test_column_scan.py tests/unit/test_big_sums.py \
	  tests/unit/test_sql_scan.py tests/property/test_sql_ir.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

# the import contract ([tool.importlinter] in pyproject.toml): layers import downward only, no
# cycles, counting imports inside functions (docs/contributing/architecture.md)
arch: $(STAMP)
	$(BIN)/lint-imports

# modules <= 450 lines, classes <= 300, functions <= 60 (.ci/sizes.py lists the waivers)
sizes: $(STAMP)
	$(BIN)/python .ci/sizes.py

# unused code in the product; the tests and benchmarks count as its users, the reviewed
# whitelist names what frameworks and other processes use
deadcode: $(STAMP)
	@out=$$($(BIN)/vulture app api engine state weir tests benchmarks .ci/vulture_whitelist.py \
	  --min-confidence 60 | grep -v -e '^tests/' -e '^benchmarks/'); \
	if [ -n "$$out" ]; then echo "$$out"; echo "deadcode: remove it, or add a reviewed entry \
	to .ci/vulture_whitelist.py saying who uses it"; exit 1; fi; echo "deadcode: none found"

# docs/reference/cli.md, docs/reference/configuration.md and the README's table of weir run's
# flags, made from the settings' declarations (a test fails while one differs)
reference: $(STAMP)
	$(BIN)/python -m weir.app.reference
	$(BIN)/python .ci/http_reference.py

# the docs site (mkdocs.yml): --strict fails on a broken link, reference or included example
docs: export NO_MKDOCS_2_WARNING := 1
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# the site on http://127.0.0.1:8001, rebuilt as pages change (Ctrl-C stops it)
docs-serve: export NO_MKDOCS_2_WARNING := 1
docs-serve: $(STAMP)
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8001

# every public name of weir, weir.client and weir.testing has a docstring (.ci/docstrings.py)
docstrings: $(STAMP)
	$(BIN)/python .ci/docstrings.py


# the drift check of the generated pages alone (what make test runs; make reference rewrites them)
reference-check: $(STAMP)
	$(BIN)/python -m weir.app.reference --check
	$(BIN)/python .ci/http_reference.py --check

docs-if-any:
	@if [ -f mkdocs.yml ]; then $(MAKE) docs; fi

# an alias: make check runs exactly what make test runs
check: test

# the peer in make bench's comparison, in its own venv so its pins never meet weir's (with
# -c constraints.txt, pip finds no versions that satisfy both)
QUIX := .bench-venvs/quix
$(QUIX)/.installed:
	test -x $(QUIX)/bin/python || $(PYTHON) -m venv $(QUIX)
	$(QUIX)/bin/python -m pip install --quiet quixstreams==3.28.0
	touch $@

# PyFlink 2.3 for the cpu section's SQL peer, likewise in its own venv (Java 17 from system-deps)
FLINK := .bench-venvs/flink
$(FLINK)/.installed:
	test -x $(FLINK)/bin/python || $(PYTHON) -m venv $(FLINK)
	$(FLINK)/bin/python -m pip install --quiet apache-flink==2.3.0
	touch $@

bench: $(STAMP) $(QUIX)/.installed $(FLINK)/.installed system-deps
	@command -v wrk >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends wrk; }
	$(BIN)/python -m benchmarks.bench

# events per CPU-second beside DuckDB and PyFlink (issue 38); also a section of make bench
bench-cpu: $(STAMP) $(FLINK)/.installed system-deps
	$(BIN)/python -m benchmarks.cpu_bench

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

# the chaos run (issue 42): the state-machine job under seeded random faults (kill -9 of workers,
# of the job manager and of weir api, a second job manager, S3 stopped, Kafka paused), ~4.5 min;
# its report (fault counts, recovery times, the verdict) goes to benchmarks/results/chaos.json.
# The soak tier runs a 40 s form (tests/soak/test_chaos.py)
chaos: $(STAMP)
	$(BIN)/python -m benchmarks.chaos --seconds 240 --repeat 2 --seed $${SEED:-1} \
	  --out benchmarks/results/chaos.json

# the file has no default token; a placeholder lets config check the rest of it
compose-check: system-deps
	WEIR_API_TOKEN=$${WEIR_API_TOKEN:-placeholder} docker-compose -f docker-compose.yml config -q \
	  && echo "docker-compose.yml is valid"

clean:
	rm -rf $(VENV) .bench-venvs .pytest_cache .mypy_cache .ruff_cache .weir
