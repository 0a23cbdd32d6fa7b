# carelens: two commands for a new user.
#   make run   installs into .venv and starts the app on a demo database
#   make test  installs into .venv and runs every test (unit, page, browser)
#   make test-fast  the same without the browser tests, for the edit-test loop
VENV ?= .venv
PY := $(VENV)/bin/python
DB ?= carelens.db
PORT ?= 8501
PYTHON ?= python3

.PHONY: install run test test-fast lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/carelens --db $(DB) demo --if-empty
	$(VENV)/bin/carelens --db $(DB) serve --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .

test: lint
	@test -x /usr/bin/chromium || echo "note: /usr/bin/chromium is missing, so the browser tests will be skipped (Debian: apt-get install chromium)"
	$(VENV)/bin/pytest

# The edit-test loop: everything but the browser tests (make test stays the whole suite).
test-fast: lint
	$(VENV)/bin/pytest -m "not browser"

# The benches' databases are thrown away: so are the record keys made for them.
bench: install
	keys=$$(mktemp -d); for f in bench/bench_*.py; do echo "== $$f"; \
	  CARELENS_KEY_DIR=$$keys $(PY) $$f || { rm -rf $$keys; exit 1; }; done; rm -rf $$keys

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
