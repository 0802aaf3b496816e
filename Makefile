# hugescope: two commands do all set-up on a fresh machine.
#   make demo   build everything (venv, release build) and run the main demonstration
#   make test   build everything and run every test (Rust and Python)
# Everything is installed into .venv and target/; nothing system-wide except
# Debian packages the Linux-side tests need, installed only when missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CARGO  ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: demo test build deps rust-test py-test bench clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	touch $@

$(VENV)/.deps: $(VENV)/.created pyproject.toml
	$(PIP) install -q "maturin>=1.5,<2" "numpy>=1.22" "pandas>=1.5" "matplotlib>=3.5" "rich>=12" "zstandard>=0.18" "pytest>=7" "hypothesis>=6"
	touch $@

deps: $(VENV)/.deps

# Release build of the Rust core and its Python extension, installed into the
# venv (editable: python/ is used in place, the extension is built in release).
build: deps
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin develop --release -q

demo: build
	$(VENV)/bin/hugescope demo --out demo-out

rust-test:
	$(CARGO) test --workspace --exclude hugescope-py

py-test: build
	$(PY) -m pytest -q tests

test: build rust-test py-test

bench: build
	$(CARGO) bench -p hugescope-core --bench throughput
	$(VENV)/bin/hugescope bench

clean:
	rm -rf $(VENV) target demo-out demo-report dist
