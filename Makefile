# The two commands: `make serve` and `make test`. Both create the venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8765

PG_BINDIR := $(firstword $(wildcard /usr/lib/postgresql/*/bin))

.PHONY: install chromium postgres serve test check lint bench bench-locomo reliability clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/uv pip install --python $(BIN)/python -q -e '.[dev,postgres,mpnet,rerank]'
	touch $(STAMP)

install: $(STAMP) chromium postgres

# Debian's headless Chromium for the inspector's browser test (tests/tools/ui/test_ui_browser.py skips without it)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
		echo "chromium could not be installed: the browser test will skip"

# PostgreSQL for the graph store's tests (tests/support/postgres.py starts throwaway servers); Debian keeps
# initdb in /usr/lib/postgresql/<version>/bin, off PATH. A no-op where it is installed.
postgres:
	@command -v initdb >/dev/null 2>&1 || test -x "$(PG_BINDIR)/initdb" || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

serve: $(STAMP)
	$(BIN)/memory-core serve --http --host $(HOST) --port $(PORT) --announce

test: $(STAMP) chromium postgres
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider

# the fast inner loop: lint, types and every test not marked slow (see docs/architecture.md)
check: $(STAMP) postgres
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench.latency.core
	$(BIN)/python -m bench.latency.recall
	$(BIN)/python -m bench.quality.token_economy

bench-locomo: $(STAMP)
	$(BIN)/python -m bench.quality.locomo --data ../shared/data/locomo_dev.json

reliability: $(STAMP)
	MEMORY_CORE_RELIABILITY=long $(BIN)/python -m pytest -q -p no:cacheprovider tests/reliability

clean:
	rm -rf $(VENV) .memory-core
