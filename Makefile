# The two commands: `make run` (the demo) and `make test` (the whole suite). Both work on a fresh
# machine: they create .venv, install the project with its extras, then run.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= test,iree,opencl,cuda,campaigns
STAMP := $(VENV)/.installed-$(subst ,,$(EXTRAS))

.PHONY: run test install bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "python venv missing: apt-get install -y python3-venv"; exit 2; }
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/halsim demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/roundtrip.py

clean:
	rm -rf $(VENV) out .pytest_cache
