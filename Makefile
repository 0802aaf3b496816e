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

.PHONY: demo test build deps clang rust-test py-test bench clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	touch $@

$(VENV)/.deps: $(VENV)/.created pyproject.toml
	$(PIP) install -q "maturin>=1.5,<2" "numpy>=1.22" "pandas>=1.5" "matplotlib>=3.5" "rich>=12" "zstandard>=0.18" "pytest>=7" "hypothesis>=6"
	touch $@

deps: $(VENV)/.deps

# clang compiles programs for 'hugescope cc' / 'hugescope trace' (its
# sanitizer-coverage load/store hooks; gcc has none). Installed from the
# distribution when missing and we are root; otherwise a message says how, and
# the tests that need it skip naming the reason.
clang:
	@if command -v clang >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "clang not found: installing it (apt-get install -y clang) for program tracing"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null || \
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null; } || \
		echo "warning: could not install clang; program-tracing tests will be skipped"; \
	else echo "note: clang not found and not root: run 'apt-get install clang' as root for 'hugescope cc' (its tests skip)"; fi

# Release build of the Rust core and its Python extension, installed into the
# venv (editable: python/ is used in place, the extension is built in release).
build: deps clang
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
