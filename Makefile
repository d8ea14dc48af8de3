# The two commands: `make run` (the demo) and `make test` (the whole suite). Both work on a fresh
# machine: they create .venv, install the project with its extras, then run.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= test,iree,opencl,cuda,campaigns
STAMP := $(VENV)/.installed-$(subst ,,$(EXTRAS))

.PHONY: run test install bench clean opencl-platform

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "python venv missing: apt-get install -y python3-venv"; exit 2; }
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	@$(if $(findstring opencl,$(EXTRAS)),$(MAKE) --no-print-directory opencl-platform,true)
	@touch $(STAMP)

# PyPI's PoCL (3.0, LLVM 14) cannot compile kernels on CPUs newer than its LLVM (AMD Zen 5: "unknown
# target CPU 'generic'"); there Debian's PoCL is installed beside it and the backend picks the PoCL
# that builds (real_backends/opencl/adapter.py: find_device).
opencl-platform:
	@$(PY) -c 'from real_backends.opencl.adapter import PLATFORM, find_device; find_device(PLATFORM)' 2>/dev/null || \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "PyPI's PoCL cannot build kernels on this CPU: installing Debian's pocl-opencl-icd"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd >/dev/null; \
	else echo "warning: no OpenCL platform here builds kernels; install pocl-opencl-icd (the opencl tests need it)"; fi

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/halsim demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/roundtrip.py

clean:
	rm -rf $(VENV) out .pytest_cache
