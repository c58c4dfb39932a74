# The course's two commands (see README.md):
#   make lab    install everything into .venv and open the course in JupyterLab
#   make test   install everything into .venv and run every test, notebooks included
# Options: GPU=1 also installs what a machine with an NVIDIA GPU needs (numba-cuda[cu13]);
#          PYTHON=python3.12 picks the interpreter the virtual environment is made from.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
comma := ,
EXTRAS := test$(if $(GPU),$(comma)gpu)
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: install browser lab test notebooks clean lock

$(STAMP): pyproject.toml requirements-lock.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements-lock.txt -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

lab: install
	$(BIN)/jupyter lab notebooks/

# tests/test_browser.py drives Debian's chromium through Playwright (never a downloaded browser).
# Install it when it is missing and we may (root with apt-get, as in CI); otherwise say so and go
# on: the browser test then skips with the reason, or fails when CI is set.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for the browser test"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
	  || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
	  || echo "could not install chromium: the browser test will skip (or fail, when CI is set)"; \
	else echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser test will skip"; fi

test: install browser
	$(BIN)/python -m pytest -rs

# Re-execute every notebook on the CPU backend and store its outputs (what CI compares).
notebooks: install
	$(BIN)/python -m course_lib.notebooks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# Re-pin requirements-lock.txt from the current environment (after changing pyproject.toml).
lock: install
	( head -3 requirements-lock.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -vi '^course-lib' | sed 's/+cpu$$//' ) > requirements-lock.txt.new
	mv requirements-lock.txt.new requirements-lock.txt
