# The two commands: `make serve` and `make test`. Both create the venv on first use.
# `make serve` installs the package and only the extras its configuration uses (CONFIG=path/to/config.toml,
# else $MEMORY_CORE_CONFIG, then MEMORY_CORE_* variables; see memory_core/extras.py); `make test` adds the
# development tools and every extra the suite exercises.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8765
CONFIG ?= $(MEMORY_CORE_CONFIG)
comma := ,
# evaluated once, on first use (stdlib only: runs before the venv exists)
SERVE_EXTRAS = $(eval SERVE_EXTRAS := $(shell $(or $(shell command -v $(PY)),python3) -m memory_core.extras $(CONFIG) \
	|| echo FAILED))$(SERVE_EXTRAS)
SERVE_STAMP = $(VENV)/.installed-serve$(if $(SERVE_EXTRAS),-$(subst $(comma),-,$(SERVE_EXTRAS)))

PG_BINDIR := $(firstword $(wildcard /usr/lib/postgresql/*/bin))

.PHONY: install install-serve chromium postgres promtool node-clients serve test check lint bench bench-locomo \
	reliability soak clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/uv pip install --python $(BIN)/python -q -e '.[dev,postgres,rerank,otel]'
	touch $(STAMP)

# one stamp per set of extras: a configuration that needs another extra installs it on the next `make serve`
install-serve: $(BIN)/python
	@test "$(SERVE_EXTRAS)" != FAILED || { echo "make serve: cannot read CONFIG=$(CONFIG)"; exit 2; }
	@test -f $(SERVE_STAMP) -a $(SERVE_STAMP) -nt pyproject.toml || { \
		echo "installing memory-core$(if $(SERVE_EXTRAS), with [$(SERVE_EXTRAS)])"; \
		$(BIN)/uv pip install --python $(BIN)/python -q -e '.$(if $(SERVE_EXTRAS),[$(SERVE_EXTRAS)])' && \
		touch $(SERVE_STAMP); }

install: $(STAMP) chromium postgres promtool node-clients

# Debian's headless Chromium for the inspector's browser test (tests/tools/ui/test_ui_browser.py skips without it)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
		echo "chromium could not be installed: the browser test will skip"

# PostgreSQL for the graph store's tests (testbed/postgres.py starts throwaway servers); Debian keeps
# initdb in /usr/lib/postgresql/<version>/bin, off PATH. A no-op where it is installed.
postgres:
	@command -v initdb >/dev/null 2>&1 || test -x "$(PG_BINDIR)/initdb" || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

# Prometheus's promtool: tests/tools/serve/test_metrics.py has it check /metrics (the parser of Prometheus itself)
promtool:
	@command -v promtool >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } || \
		echo "promtool could not be installed: /metrics is checked by the Python client's parser only"

# The official TypeScript MCP SDK and the Claude Code CLI, pinned in tests/support/node/package-lock.json, into
# tests/support/node/node_modules (git-ignored); tests/tools/serve/test_restart.py drives them (Node 18+)
NODE_CLIENTS := tests/support/node/node_modules/.installed
node-clients: $(NODE_CLIENTS)

$(NODE_CLIENTS): tests/support/node/package.json tests/support/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/support/node --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the TypeScript SDK and Claude Code tests will skip"; fi

serve: install-serve
	$(BIN)/memory-core serve --http --host $(HOST) --port $(PORT) --announce$(if $(CONFIG), --config $(CONFIG))

# one worker per core, a test file's tests on one worker (their module fixtures are shared)
test: $(STAMP) chromium postgres promtool node-clients
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

# the fast inner loop: lint, types and every test not marked slow (see docs/architecture.md); it names
# its ten slowest tests, so a test that grew slow is seen where it ran
check: $(STAMP) postgres
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" --durations=10

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

# the published soak (docs/reliability.md): 32 writers and 8 recallers over HTTP, the server SIGKILLed every few
# minutes, SOAK_MINUTES on each graph backend; reports in bench/results/soak, the figure in docs/figures/soak.png
SOAK_MINUTES ?= 30
soak: $(STAMP) postgres
	$(BIN)/python -m bench.soak.run --backend sqlite --minutes $(SOAK_MINUTES) --out bench/results/soak
	$(BIN)/python -m bench.soak.run --backend postgres --minutes $(SOAK_MINUTES) --out bench/results/soak
	$(BIN)/python -m bench.soak.figure bench/results/soak/soak-sqlite.json bench/results/soak/soak-postgres.json \
		--out docs/figures/soak.png

clean:
	rm -rf $(VENV) .memory-core .claude-cli
