# privrec — the README's two commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PACKAGES := privrec shared server client adversary sim
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: demo test check protos bench flower-env clean bytecode kernels

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,ray]'
	@rm -f $(VENV)/.installed-* && touch $@

# An editable install leaves our modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set
# every node process compiles them again when it starts (docs/decisions/startup.md).
# compileall writes what is missing or stale and is quick when all is current.
bytecode: $(STAMP)
	@$(PY) -m compileall -q $(PACKAGES) >/dev/null

# numba compiles each kernel on its first call and caches it on disk (cache=True); without this
# step the first run paid for every compilation in every node (docs/decisions/compute.md).
# sim/kernel_cache.py runs the default scenario on a few users in one process; redone when a
# module with kernels changes.
KERNEL_SOURCES := $(shell grep -rl --include='*.py' 'cache=True' $(PACKAGES))
KERNEL_STAMP := $(VENV)/.kernels-cached
$(KERNEL_STAMP): $(STAMP) $(KERNEL_SOURCES)
	@$(PY) -m compileall -q $(PACKAGES) >/dev/null
	$(PY) -m privrec.sim.kernel_cache
	@touch $@

kernels: $(KERNEL_STAMP)

## make demo: set up .venv and run the default simulation (ML-100K, RPT + PPCF, real processes)
demo: bytecode kernels
	$(VENV)/bin/privrec sim --out runs/demo

## make test: set up .venv with [dev] and [ray] and run the whole suite
test: bytecode
	$(PY) -m pytest -q

SOURCES := privrec shared server client adversary sim tests bench scripts setup.py

## make check: lint, formatting and types
check: $(STAMP)
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(PY) scripts/typecheck.py

protos: $(STAMP)
	$(PY) scripts/gen_protos.py

## make bench: the quick variant of every benchmark under bench/ (vs_flower only with Flower)
bench: bytecode kernels
	$(PY) bench/ingest.py --users 5000
	$(PY) bench/attacks.py --quick
	$(PY) bench/ppcf_mae.py
	$(PY) bench/neighbourhood.py --quick --launcher inprocess --mqtt none
	$(PY) bench/population.py --quick
	@if $(PY) bench/vs_flower.py --quick; then :; else rc=$$?; \
	  if [ $$rc -eq 2 ]; then echo "bench/vs_flower.py skipped: Flower is not installed (make flower-env)"; \
	  else exit $$rc; fi; fi

## make flower-env: Flower's simulation engine (the [bench] extra) in .venv-flower, for vs_flower
FLOWER_VENV ?= .venv-flower
flower-env:
	@test -x $(FLOWER_VENV)/bin/python || $(PYTHON) -m venv $(FLOWER_VENV)
	$(FLOWER_VENV)/bin/python -m pip install --quiet "$$($(PYTHON) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"])')"

clean:
	rm -rf $(VENV) runs .pytest_cache
