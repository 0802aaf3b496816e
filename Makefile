# hugescope: two commands do all set-up on a fresh machine.
#   make demo   build everything (venv, release build) and run the main demonstration
#   make test   build everything and run every test (Rust and Python)
#   make wheel  a manylinux2014 wheel in dist/ (make test builds and installs it)
# Everything is installed into .venv and target/; nothing system-wide except
# Debian packages the Linux-side tests need, installed only when missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CARGO  ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: demo test build deps clang redis bins wheel rust-test py-test fuzz-smoke bench clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	touch $@

# The package's own extras (pyproject.toml is the one dependency list): the
# Python dependencies are installed by 'maturin develop -E' in 'build'; only
# the build backend itself is installed here, read from build-system.requires.
EXTRAS := test,plot,parquet,ray,dev
BUILD_REQUIRES = $$($(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'])")

$(VENV)/.deps: $(VENV)/.created pyproject.toml
	$(PIP) install -q $(BUILD_REQUIRES)
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

# The Rust helper binaries the docs name (hugescope-fragment, hugescope-memhold)
# go into the wheel's scripts directory (pyproject.toml: tool.maturin.data), so
# installing the package installs them beside 'hugescope'.
WHEEL_SCRIPTS := target/wheel-data/scripts
HELPER_BINS := hugescope-fragment hugescope-memhold

bins:
	$(CARGO) build --release -q -p hugescope-linux --bins
	mkdir -p $(WHEEL_SCRIPTS)
	for b in $(HELPER_BINS); do install -m 0755 target/release/$$b $(WHEEL_SCRIPTS)/$$b; done

# Release build of the Rust core and its Python extension, installed into the
# venv with the extras (editable: python/ is used in place, the extension is
# built in release).
build: deps clang bins
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin develop --release -q -E $(EXTRAS)

# A manylinux2014 wheel in dist/, built offline from the registries: zig (the
# ziglang package of the 'dev' extra) links against glibc 2.17, so the wheel
# installs on any distribution of the last decade. The helper binaries are
# built the same way (maturin's bin bindings) so they carry the same tag.
# Rebuilt only when a source is newer than the wheel. The binaries are built
# from their crate's directory, so maturin does not apply the package's
# pyproject.toml (its features belong to the extension crate). The docs go in
# as package data (hugescope/_docs, for 'hugescope docs'), copied in for the
# build only (scripts/hugescope_build.py --with-docs).
WHEEL_SRC := $(shell find crates python -name '*.rs' -o -name '*.py' -o -name Cargo.toml 2>/dev/null) $(wildcard docs/*.md) pyproject.toml Cargo.lock README.md LICENSE
ZIG_ENV = VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH
wheel: dist/.wheel
dist/.wheel: $(WHEEL_SRC) | build
	rm -rf dist target/wheel-bins
	cd crates/hugescope-linux && $(ZIG_ENV) $(abspath $(VENV))/bin/maturin build --release -q \
		--compatibility manylinux2014 --zig -b bin -o $(abspath target/wheel-bins)
	rm -rf $(WHEEL_SCRIPTS) && mkdir -p $(WHEEL_SCRIPTS)
	$(PY) -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [open('$(WHEEL_SCRIPTS)/' + n.rsplit('/', 1)[1], 'wb').write(z.read(n)) for n in z.namelist() if '.data/scripts/' in n]" target/wheel-bins/*.whl
	chmod 0755 $(WHEEL_SCRIPTS)/*
	$(PY) scripts/hugescope_build.py --with-docs -- env $(ZIG_ENV) $(VENV)/bin/maturin build --release -q \
		--compatibility manylinux2014 --zig -o dist
	touch $@

demo: build
	$(VENV)/bin/hugescope demo --out demo-out

# The tests' results cache (hugescope-core result_cache): a fresh private
# directory, never the user's ~/.cache/hugescope.
TEST_CACHE := $(abspath target/test-cache)
rust-test:
	rm -rf $(TEST_CACHE)
	HUGESCOPE_CACHE_DIR=$(TEST_CACHE) $(CARGO) test --workspace --exclude hugescope-py

# redis-server and redis-benchmark: the distribution program 'hugescope
# daemon-study' measures the daemon on (its test runs a small study). Installed
# from the distribution when missing and we are root, like clang; otherwise
# that one test skips naming the reason.
redis:
	@if command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "redis not found: installing it (apt-get install -y redis-server) for the daemon study's test"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server >/dev/null || \
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server >/dev/null; } || \
		echo "warning: could not install redis-server; the daemon study's redis test will be skipped"; \
	else echo "note: redis-server not found and not root: its test skips"; fi

py-test: build wheel redis
	$(PY) -m pytest -q tests

# Every parser's coverage-guided fuzz target (fuzz/, scripts/fuzz.sh) for a
# few seconds each from its committed seeds: a crash fails the test.
fuzz-smoke:
	scripts/fuzz.sh smoke 4

test: build rust-test py-test fuzz-smoke

bench: build
	$(CARGO) bench -p hugescope-core --bench throughput
	$(VENV)/bin/hugescope bench

clean:
	rm -rf $(VENV) target demo-out demo-report dist
