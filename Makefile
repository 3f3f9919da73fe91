# sparkcdc — the README's commands.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-demo demo test unit lint typecheck bench

## Everything: what the demo runs, plus the tests' apt packages and the dev extra.
setup:
	bash scripts/setup.sh all

## Only what the demo runs: MariaDB, Java 17, gcc + Python headers and the .venv (runtime packages).
setup-demo:
	bash scripts/setup.sh demo

## Install what the demo runs, start a local MariaDB, write a sample workload and run a changefeed to CSV files.
demo: setup-demo
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
