# privrec — the README's two commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: demo test check protos bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

## make demo: set up .venv and run the default simulation (ML-100K, RPT + PPCF, real processes)
demo: $(STAMP)
	$(VENV)/bin/privrec sim --out runs/demo

## make test: set up .venv with [dev] and run the whole suite
test: $(STAMP)
	$(PY) -m pytest -q

SOURCES := privrec shared server client adversary sim tests bench scripts setup.py

## make check: lint, formatting and types
check: $(STAMP)
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(PY) scripts/typecheck.py

protos: $(STAMP)
	$(PY) scripts/gen_protos.py

bench: $(STAMP)
	$(PY) bench/ingest.py

clean:
	rm -rf $(VENV) runs .pytest_cache
