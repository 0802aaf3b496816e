"""Shared fixtures: small traces generated once per test session."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

# Property tests draw the same cases on every run (a test run is a check,
# not a search; a red CI must be reproducible on any machine). To search
# for new failing inputs instead: HYPOTHESIS_PROFILE=explore make test.
settings.register_profile("check", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "check"))

import hugescope as hs
from hugescope import cli

# The results cache (core result_cache) of this test session: a private
# directory, not the user's ~/.cache/hugescope, shared by every test (and the
# CLI subprocesses they start) so the warm path runs through the whole suite.
if not os.environ.get("HUGESCOPE_CACHE_DIR"):
    _cache = tempfile.mkdtemp(prefix="hugescope-test-cache-")
    os.environ["HUGESCOPE_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)


# The calibrated preset (~/.config/hugescope/calibrated.toml) is the default
# machine of advise and validate when it exists (issue #36): the tests see
# none unless they write one, whatever the machine running them has saved.
if not os.environ.get("HUGESCOPE_KEEP_CONFIG_HOME"):
    _config_home = tempfile.mkdtemp(prefix="hugescope-test-config-")
    os.environ["XDG_CONFIG_HOME"] = _config_home
    atexit.register(shutil.rmtree, _config_home, True)


@pytest.fixture(scope="session")
def tracedir(tmp_path_factory):
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="session")
def gups_trace(tracedir):
    p = tracedir / "gups.hst"
    hs.workloads.trace("gups", str(p), size="64MiB", updates=200_000, seed=3)
    return str(p)


@pytest.fixture(scope="session")
def bfs_trace(tracedir):
    p = tracedir / "bfs.hst"
    hs.workloads.trace("bfs", str(p), scale=16, seed=1)
    return str(p)


@pytest.fixture(scope="session")
def kv_bloat_trace(tracedir):
    # Ingens §3.2 / Table 5: load keys with 8KB objects, delete 70% at random.
    p = tracedir / "kv.hst"
    hs.workloads.trace("kv", str(p), records=8000, value_size=8192, delete_fraction=0.7, ops=20_000, seed=2)
    return str(p)


def run_cli(*args, capsys=None):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in args])
    if capsys is not None:
        out, err = capsys.readouterr()
        return code, out, err
    return code, "", ""


def assert_workload_refused(name, params, names, capsys, tmp_path):
    """Bad workload parameters: the API raises naming them, and `hugescope
    trace` exits 2 with one `error:` line naming them, writing no trace."""
    with pytest.raises(hs.HugescopeError, match=names):
        hs.workloads.layout(name, **params)
    args = [f"--{k.replace('_', '-')}={v}" for k, v in params.items()]
    code, _, err = run_cli("trace", name, *args, "-o", tmp_path / "x.hst", capsys=capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and names in lines[0], err
    assert not (tmp_path / "x.hst").exists()


def load(path):
    with open(path) as f:
        return json.load(f)
