# sparkcdc — the README's commands.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test unit lint typecheck bench

setup:
	bash scripts/setup.sh

## Install what is needed, start a local MariaDB, write a sample workload and run a changefeed to CSV files.
demo: setup
	$(PY) -m sparkcdc.demo

## The whole test suite (unit, integration, e2e) against real local services.
test: setup
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 tests

unit: setup
	$(PY) -m pytest -q tests/unit

lint:
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck:
	$(VENV)/bin/mypy

bench: setup
	$(PY) bench/capture/run.py
