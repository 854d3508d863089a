# respect-jax: the two commands of the README.
#   make run    create .venv, install the pinned dependencies, run the main job on a small CPU default
#   make test   create .venv, install the pinned dependencies + test tools, run the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
export JAX_PLATFORMS ?= cpu

.PHONY: install run test test-slow test-coral bench lock clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

run: install
	$(BIN)/python -m respect_jax.cli.main_job

# 2 workers (most test time is single-threaded XLA compilation), one test file per worker at a time, the files in
# collection order: tests/conftest.py puts the longest files first (xdist's own order is by number of tests)
test: install
	$(BIN)/ruff check respect_jax tests experiments
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

test-slow: install
	$(BIN)/pytest -q -m slow

# the Coral adapter's TensorFlow/LiteRT tests, in their own venv (TensorFlow is ~1.6 GB; installed once per pin set)
CORAL_STAMP := .venv-coral/.installed-$(shell cat pyproject.toml constraints-coral.txt | cksum | cut -d' ' -f1)

$(CORAL_STAMP): pyproject.toml constraints-coral.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
	$(PYTHON) -m venv .venv-coral
	.venv-coral/bin/pip install --quiet -c constraints-coral.txt -e '.[coral,test]'
	rm -f .venv-coral/.installed-*
	touch $@

test-coral: $(CORAL_STAMP)
	.venv-coral/bin/pytest -q -m coral tests/test_coral.py tests/test_coral_tflite.py

bench: install
	$(BIN)/respect-bench

lock: install
	{ echo "# Exact versions tested in CI (pip install -c constraints.txt -e '.[test]')."; \
	  echo "# Regenerate with: make lock   (from a venv made by 'make install')"; \
	  $(BIN)/pip freeze --exclude-editable; } > constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache outputs multirun
