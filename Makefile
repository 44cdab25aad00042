# The two commands of the README: `make synth` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
STACK ?= dev-aws
BIN = $(VENV)/bin

.PHONY: setup setup-trainer setup-prometheus synth test typecheck

# Reinstall when the project's dependencies change.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# The trainer (training_images/) and the CPU build of torch its tests run on. The exact pin
# keeps pip from choosing a newer, CUDA-sized build.
$(VENV)/.trainer-installed: $(VENV)/.installed training_images/pyproject.toml
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e training_images
	touch $@

setup: $(VENV)/.installed

# promtool and the Prometheus server from Debian's prometheus package: the alert rule tests run
# `promtool check rules` / `promtool test rules` and the loopback test starts the server
# (tests/observability, tests/trainer); installed where the machine lacks them (apt-get, as root).
setup-prometheus:
	@command -v promtool >/dev/null || { apt-get update -q && apt-get install -y -q prometheus; }

setup-trainer: $(VENV)/.trainer-installed

synth: setup
	$(BIN)/gpu-platform synth $(STACK)

# pytest on every core (pytest-xdist; loadfile keeps each test file on one worker, so module
# fixtures such as a review's scratch repository are built once) with pyright beside it: pyright
# is one process, and the trainer tests leave cores idle while their runs start. Files go out in
# collection order, the longest first (tests/conftest.py LONGEST_FIRST), not xdist's
# most-tests-first. pyright's report is printed after the tests' (with their 15 slowest); either
# failing fails the target.
test: setup setup-trainer setup-prometheus
	@mkdir -p build
	@$(BIN)/pyright > build/pyright.log 2>&1 & typecheck=$$!; \
	$(BIN)/pytest -n auto --dist loadfile --no-loadscope-reorder --durations=15; tests=$$?; \
	wait $$typecheck; types=$$?; \
	echo "--- pyright (exit $$types)"; cat build/pyright.log; \
	test $$tests -eq 0 && test $$types -eq 0

typecheck: setup
	$(BIN)/pyright
