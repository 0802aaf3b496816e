"""The package as a user installs it: metadata, `python -m hugescope`, the
helper binaries the docs name, and the manylinux wheel of `make wheel`
installed into a fresh virtual environment."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

import hugescope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The Rust [[bin]]s the docs name; installing the package installs them.
HELPERS = ("hugescope-fragment", "hugescope-memhold")


def _pyproject() -> dict:
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_python_dash_m_version():
    r = subprocess.run([sys.executable, "-m", "hugescope", "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"hugescope {hugescope.__version__}"


def test_license_and_metadata():
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert text.startswith("MIT License") and "the hugescope authors" in text
    p = _pyproject()["project"]
    assert p["license"] == {"text": "MIT"} and "License :: OSI Approved :: MIT License" in p["classifiers"]
    assert p["authors"] == [{"name": "the hugescope authors"}] and p["keywords"]
    # Plotting and Parquet are extras: the CLI's own dependencies hold neither.
    deps = " ".join(p["dependencies"])
    assert "matplotlib" not in deps and "pyarrow" not in deps
    assert any(d.startswith("matplotlib") for d in p["optional-dependencies"]["plot"])
    assert any(d.startswith("pyarrow") for d in p["optional-dependencies"]["parquet"])
    # Ray too (--backend ray), and 'make build' installs it so its tests run.
    assert "ray" not in deps and any(d.startswith("ray") for d in p["optional-dependencies"]["ray"])
    # No invented addresses anywhere in the metadata.
    for path in [os.path.join(ROOT, "Cargo.toml"), os.path.join(ROOT, "pyproject.toml")]:
        with open(path) as f:
            assert "example.invalid" not in f.read(), path


def test_makefile_installs_the_package_extras_not_a_second_list():
    with open(os.path.join(ROOT, "Makefile")) as f:
        make = f.read()
    installs = [line for line in make.splitlines() if "pip install" in line or "maturin develop" in line]
    assert installs
    for line in installs:
        for name in ("numpy", "pandas", "matplotlib", "pytest", "hypothesis", "scipy", "pyarrow", "ziglang", "ray"):
            assert name not in line, line
    assert "-E $(EXTRAS)" in make
    extras = next(line for line in make.splitlines() if line.startswith("EXTRAS"))
    assert set(extras.split(":=")[1].strip().split(",")) >= {"test", "plot", "parquet", "ray"}


@pytest.mark.parametrize("name", HELPERS)
def test_helper_binaries_installed_beside_hugescope(name):
    exe = os.path.join(sysconfig.get_path("scripts"), name)
    if not os.path.exists(exe):
        pytest.skip(f"{name} not installed: 'make build' installs it (this venv was built another way)")
    assert os.access(exe, os.X_OK)
    # A bad argument: the binary's own one-line usage error, not a crash.
    r = subprocess.run([exe, "--no-such-option"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and name in r.stderr and "panicked" not in r.stderr, r.stderr


def test_source_install_builds_the_helper_binaries_first(monkeypatch, tmp_path):
    """'pip install .' goes through scripts/hugescope_build.py, which builds
    the helpers into maturin's data directory before maturin packs the wheel
    (a whole 'pip install .' into a fresh venv is in docs/cli.md: it rebuilds
    the extension, too slow for every test run)."""
    import importlib.util

    build = _pyproject()["build-system"]
    assert build["build-backend"] == "hugescope_build" and build["backend-path"] == ["scripts"]
    assert _pyproject()["tool"]["maturin"]["data"] == "target/wheel-data"
    pytest.importorskip("maturin")
    spec = importlib.util.spec_from_file_location("hugescope_build", os.path.join(ROOT, "scripts", "hugescope_build.py"))
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    assert backend.HELPERS == HELPERS
    seen = {}

    def packed(wheel_directory, config_settings=None, metadata_directory=None):
        # What maturin would find in the data directory when it packs the wheel.
        seen["scripts"] = sorted(os.listdir(backend.SCRIPTS))
        return "hugescope.whl"

    monkeypatch.setattr(backend.maturin, "build_wheel", packed)
    assert backend.build_wheel(str(tmp_path)) == "hugescope.whl"
    assert seen["scripts"] == sorted(HELPERS)
    for name in HELPERS:
        exe = os.path.join(backend.SCRIPTS, name)
        r = subprocess.run([exe, "--no-such-option"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and name in r.stderr and "panicked" not in r.stderr, r.stderr


# ---------------------------------------------------------------- the wheel

def _wheel() -> str:
    found = sorted(glob.glob(os.path.join(ROOT, "dist", "hugescope-*.whl")))
    if not found:
        pytest.skip("no wheel in dist/: 'make wheel' builds it ('make test' does so first)")
    return found[-1]


def test_wheel_is_manylinux_and_complete():
    whl = _wheel()
    assert re.search(r"-cp39-abi3-.*manylinux_2_17_x86_64.*\.whl$", whl), whl
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for h in HELPERS:
        assert any(n.endswith(f".data/scripts/{h}") for n in names), names
    pages = sorted(f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("hugescope/_docs/")) == pages
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith("/LICENSE") for n in names), names
    assert "Provides-Extra: plot" in meta and "Provides-Extra: parquet" in meta
    assert "Classifier: License :: OSI Approved :: MIT License" in meta


def test_wheel_installs_in_a_fresh_venv(tmp_path):
    whl = _wheel()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    # Offline: the wheel alone (--no-deps) with this environment's pip; its
    # dependencies come from this environment's site-packages, appended after
    # the fresh one's, so 'hugescope' itself is the wheel's and nothing else.
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-index", whl], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(site, "zz-deps.pth"), "w") as f:
        f.write(sysconfig.get_path("purelib") + "\n")
    r = subprocess.run([str(py), "-m", "hugescope", "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"hugescope {hugescope.__version__}", r.stderr
    r = subprocess.run([str(py), "-c", "import hugescope; print(hugescope.__file__)"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.stdout.strip().startswith(site), r.stdout  # the wheel's copy, not the source tree
    r = subprocess.run([str(venv / "bin" / "hugescope"), "policies", "--format", "json"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = {p["name"] for p in json.loads(r.stdout)}
    assert {"linux", "pcc", "hawkeye"} <= names
    for h in HELPERS:
        assert os.access(venv / "bin" / h, os.X_OK), h
    # The docs travel in the wheel: 'hugescope docs' lists and prints them
    # with no source tree around (issue #38).
    r = subprocess.run([str(venv / "bin" / "hugescope"), "docs"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "linux" in r.stdout, r.stderr
    r = subprocess.run([str(venv / "bin" / "hugescope"), "docs", "linux"], capture_output=True, text=True,
                       cwd=tmp_path)
    with open(os.path.join(ROOT, "docs", "linux.md")) as f:
        assert r.returncode == 0 and r.stdout == f.read(), r.stderr


# ---------------------------------------------------------------- the docs

def _help_texts(capsys) -> dict:
    """The help of every command, as a user sees it."""
    import argparse

    from hugescope import cli
    from conftest import run_cli

    out = {"hugescope": cli.build_parser().format_help()}
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        out[name] = p.format_help()
    for argv in (["trace", "--help"], ["trace", "info", "--help"], ["trace", "import", "--help"],
                 ["trace", "convert", "--help"], ["trace", "merge", "--help"], ["native", "--help"],
                 ["validate", "--help"], ["validate", "--suite", "default", "--help"], ["run", "--help"]):
        try:
            run_cli(*argv, capsys=capsys)
        except SystemExit:
            pass
        out[" ".join(argv)] = capsys.readouterr().out
    return out


def test_every_doc_page_a_help_text_cites_is_available(capsys):
    # Issue #38: help said "See docs/linux.md", which an installed package
    # does not have. Every citation is 'hugescope docs NAME' of a page there is.
    from hugescope import manual

    names = {n for n, _ in manual.topics()}
    assert {"linux", "cli", "daemon", "tracing", "configuration", "policies"} <= names
    cited = set()
    for cmd, text in _help_texts(capsys).items():
        flat = " ".join(text.split())
        raw = re.findall(r"(?<!')docs/[\w-]+\.md", flat)
        assert not raw, f"'{cmd} --help' cites {raw}: not something an installed package has"
        for name in re.findall(r"'hugescope docs ([a-z][a-z0-9-]*)'", flat):
            assert name in names, f"'{cmd} --help' cites a page that does not exist: {name}"
            cited.add(name)
    assert {"linux", "daemon", "configuration"} <= cited, cited


def test_docs_command_lists_and_prints_pages(capsys):
    from conftest import run_cli

    code, out, _ = run_cli("docs", capsys=capsys)
    assert code == 0 and "linux" in out and "Command line" in out
    with open(os.path.join(ROOT, "docs", "linux.md")) as f:
        page = f.read()
    for name in ("linux", "linux.md", "docs/linux.md"):
        code, out, _ = run_cli("docs", name, capsys=capsys)
        assert code == 0 and out == page, name
    code, _, err = run_cli("docs", "nosuch", capsys=capsys)
    assert code == 2 and "no documentation page 'nosuch'" in err and "linux" in err
