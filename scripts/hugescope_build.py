"""The PEP 517 build backend of hugescope: maturin's, with the Rust helper
binaries built first.

maturin builds the extension crate only; the helper binaries the docs name
(hugescope-fragment, hugescope-memhold, crate hugescope-linux) reach the
wheel through its data directory (pyproject.toml: tool.maturin.data =
"target/wheel-data", whose scripts/ are installed beside 'hugescope'). So
that a plain 'pip install .' from a source checkout installs them too, the
wheel hooks first build them with cargo (release, incremental) and copy them
there, then hand over to maturin. 'make build' and 'make wheel' call maturin
directly and fill the directory themselves ('make bins'; zig-linked for the
manylinux wheel).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys

try:
    import maturin
except ImportError:  # run as a script by 'make wheel' (only docs_in_package is needed)
    maturin = None
if maturin is not None:
    from maturin import (  # noqa: F401 - the hooks this backend passes through unchanged
        build_sdist,
        get_requires_for_build_editable,
        get_requires_for_build_sdist,
        get_requires_for_build_wheel,
    )

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The crate holding the helper binaries, and the binaries the docs name.
HELPER_CRATE = "hugescope-linux"
HELPERS = ("hugescope-fragment", "hugescope-memhold")
#: tool.maturin.data of pyproject.toml, plus the scripts/ maturin installs as commands.
SCRIPTS = os.path.join(ROOT, "target", "wheel-data", "scripts")


def helper_binaries() -> list:
    """Build the helper binaries and copy them into the wheel's scripts
    directory; returns their paths there."""
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "--release", "--locked", "-p", HELPER_CRATE, "--bins"]
    try:
        subprocess.run(cmd, cwd=ROOT, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"hugescope: building the helper binaries failed ({' '.join(cmd)}: {e}); "
                           "a Rust toolchain (cargo) is needed to install from source") from e
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    os.makedirs(SCRIPTS, exist_ok=True)
    out = []
    for name in HELPERS:
        dest = os.path.join(SCRIPTS, name)
        shutil.copyfile(os.path.join(target, "release", name), dest)
        os.chmod(dest, 0o755)
        out.append(dest)
    return out


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # maturin checks that the data directory exists before writing metadata.
    os.makedirs(SCRIPTS, exist_ok=True)
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    os.makedirs(SCRIPTS, exist_ok=True)
    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


@contextlib.contextmanager
def docs_in_package():
    """The documentation pages as package data while a wheel is built: the
    repository's ``docs/*.md`` copied to ``python/hugescope/_docs`` (what
    ``hugescope docs`` reads in an installed package), removed afterwards so
    the source tree keeps one copy. maturin packs every file of the package
    directory that git does not ignore, so the copy must not be ignored."""
    src = os.path.join(ROOT, "docs")
    dest = os.path.join(ROOT, "python", "hugescope", "_docs")
    shutil.rmtree(dest, ignore_errors=True)
    if os.path.isdir(src):
        os.makedirs(dest)
        for name in sorted(os.listdir(src)):
            if name.endswith(".md"):
                shutil.copyfile(os.path.join(src, name), os.path.join(dest, name))
    try:
        yield dest
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    helper_binaries()
    with docs_in_package():
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def main(argv) -> int:
    """``hugescope_build.py --with-docs -- COMMAND ...``: run a wheel build
    command (``make wheel``'s maturin) with the docs in the package."""
    if argv[:2] != ["--with-docs", "--"] or len(argv) < 3:
        print("usage: hugescope_build.py --with-docs -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with docs_in_package():
        return subprocess.run(argv[2:]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    helper_binaries()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
