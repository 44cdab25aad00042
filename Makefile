# The two commands of the README: `make synth` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
STACK ?= dev-aws
BIN = $(VENV)/bin

.PHONY: setup synth test typecheck

# Reinstall when the project's dependencies change.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

synth: setup
	$(BIN)/gpu-platform synth $(STACK)

test: setup
	$(BIN)/pyright
	$(BIN)/pytest

typecheck: setup
	$(BIN)/pyright
