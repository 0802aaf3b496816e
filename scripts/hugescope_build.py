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

import os
import shutil
import subprocess

import maturin
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


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    helper_binaries()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    helper_binaries()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
