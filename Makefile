# The course's two commands (see README.md):
#   make lab    install what a learner needs into .venv and open the course in JupyterLab
#   make test   install that plus the test tools into .venv and run every test, notebooks included
# Options:
#   GPU=1             also install what the GPU path needs: numba-cuda's CUDA 13 pieces, ninja and nvcc
#                     (from PyPI) to build the course's CUDA C++ extension
#   CPU_ONLY=1        take torch from PyTorch's CPU wheel index (about 0.2 GB) instead of PyPI's
#                     CUDA build (about 3 GB with the CUDA libraries it pulls); the course then runs
#                     on the CPU only
#   REMOTE=1          make lab on a remote machine: no browser, listening on 127.0.0.1:$(PORT) for an
#                     SSH tunnel (README: "On a remote GPU machine")
#   PYTHON=python3.12 the interpreter the virtual environment is made from (3.11 to 3.13)

PYTHON ?= python3
VENV ?= .venv
PORT ?= 8888
BIN := $(VENV)/bin
comma := ,
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PIN = $(shell sed -n 's/^torch==//p' requirements-lock.txt)

ifneq ($(and $(GPU),$(CPU_ONLY)),)
$(error GPU=1 and CPU_ONLY=1 exclude each other: choose one)
endif

# Extras of course-lib (pyproject.toml) per command; each set gets its own stamp, so `make test`
# after `make lab` installs only what the test extras add.
LAB_EXTRAS := $(if $(GPU),gpu)
TEST_EXTRAS := test$(if $(GPU),$(comma)gpu)
stamp = $(VENV)/.installed-$(or $(subst $(comma),-,$(1)),base)$(if $(CPU_ONLY),-cpu-only)

.PHONY: platform lab test notebooks browser clean lock

# Stops at once, with one message naming the supported route, where the install cannot work.
platform:
	@$(PYTHON) tools/check_platform.py $(if $(GPU),--gpu)

$(VENV)/bin/python: | platform
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# JupyterLab's settings for the course, installed as the defaults of the environment's JupyterLab:
# widgets save their state with the notebook (a notebook you ran, saved and reopened shows its
# pictures instead of "model not found"), no news prompt (tools/jupyterlab/overrides.json), and a
# server that fills in each notebook's language_info as this environment's kernel reports it, so an
# untouched notebook is not marked modified when it opens (tools/jupyterlab/course_server.json,
# course_lib/jupyter.py).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
SERVER_CONFIG := $(VENV)/etc/jupyter/jupyter_server_config.json

# $(call install,extras): the package (editable) with those extras, every version from the lock.
define install
	$(if $(CPU_ONLY),$(BIN)/python -m pip install --quiet --index-url $(TORCH_CPU_INDEX) torch==$(TORCH_PIN))
	$(BIN)/python -m pip install --quiet -c requirements-lock.txt -e ".$(if $(1),[$(1)])"
	mkdir -p $(dir $(LAB_SETTINGS)) && cp tools/jupyterlab/overrides.json $(LAB_SETTINGS)
	mkdir -p $(dir $(SERVER_CONFIG)) && cp tools/jupyterlab/course_server.json $(SERVER_CONFIG)
	touch $@
endef

$(call stamp,$(LAB_EXTRAS)): pyproject.toml requirements-lock.txt tools/jupyterlab/overrides.json tools/jupyterlab/course_server.json | $(VENV)/bin/python platform
	$(call install,$(LAB_EXTRAS))

$(call stamp,$(TEST_EXTRAS)): pyproject.toml requirements-lock.txt tools/jupyterlab/overrides.json tools/jupyterlab/course_server.json | $(VENV)/bin/python platform
	$(call install,$(TEST_EXTRAS))

# JupyterLab's file browser starts at the repository root, so the CUDA sources notebook 05 discusses
# (course_lib/csrc/) are a click away; the first notebook opens. REMOTE=1 keeps the token (the URL
# with ?token=... is printed) and listens on the loopback interface only. Run as root (a container),
# Jupyter refuses to start without --allow-root, which is then added.
lab: $(call stamp,$(LAB_EXTRAS))
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.default_url=/lab/tree/notebooks/00_gpu_execution_model.ipynb \
	  --LabApp.news_url= --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	  $(if $(REMOTE),--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) --ServerApp.port_retries=0) \
	  $(if $(filter 0,$(shell id -u)),--allow-root)

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

test: $(call stamp,$(TEST_EXTRAS)) browser
	$(BIN)/python -m pytest -rs

# Re-execute every notebook on the CPU backend and store its outputs (what CI compares).
notebooks: $(call stamp,$(TEST_EXTRAS))
	$(BIN)/python -m course_lib.notebooks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# Re-resolve requirements-lock.txt on PyPI alone (after changing pyproject.toml); no wheel is
# downloaded and this machine's pip settings are ignored (tools/lock.py).
lock: $(VENV)/bin/python
	$(BIN)/python tools/lock.py
