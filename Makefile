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

.PHONY: install lab test notebooks clean lock

$(STAMP): pyproject.toml requirements-lock.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements-lock.txt -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

lab: install
	$(BIN)/jupyter lab notebooks/

test: install
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
