"""The results cache (core ``result_cache``): a cached base reference gives
result files byte-identical to simulating it; ``--no-cache`` neither reads
nor writes; ``hugescope cache info|clear``; an untrusted cache directory is
not used (one note line, same results); a sweep reuses the entry."""

from __future__ import annotations

import json
import os

import pytest

from hugescope import experiments as ex

from conftest import run_cli


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("HUGESCOPE_CACHE_DIR", str(d))
    monkeypatch.delenv("HUGESCOPE_NO_CACHE", raising=False)
    return d


def _entries(d):
    return sorted(p for p in d.glob("*.entry")) if d.exists() else []


SIM = ["--preset", "haswell-pcc", "--policy", "pcc", "--policy", "linux", "--budget", "50%"]


def test_cached_and_uncached_runs_write_the_same_bytes(cache, bfs_trace, tmp_path, capsys):
    outs = {k: tmp_path / f"{k}.json" for k in ("off", "cold", "warm")}
    assert run_cli("--no-cache", "simulate", bfs_trace, *SIM, "--json", outs["off"], "-q") == (0, "", "")
    assert _entries(cache) == [], "--no-cache stores nothing"
    code, _, err = run_cli("simulate", bfs_trace, *SIM, "--json", outs["cold"], capsys=capsys)
    assert code == 0 and "reused" not in err, err
    assert len(_entries(cache)) == 1
    code, _, err = run_cli("simulate", bfs_trace, *SIM, "--json", outs["warm"], capsys=capsys)
    assert code == 0 and "reused 1 cached reference run (1 base) from the results cache" in err, err
    off = outs["off"].read_bytes()
    assert outs["cold"].read_bytes() == off and outs["warm"].read_bytes() == off
    # The speedups are there, computed from the cached reference.
    assert all(r["speedup_vs_base"] is not None for r in json.loads(off))
    # --no-cache again: the entry is not read (no line), the bytes the same.
    code, _, err = run_cli("--no-cache", "simulate", bfs_trace, *SIM, "--json", outs["warm"], capsys=capsys)
    assert code == 0 and "reused" not in err and outs["warm"].read_bytes() == off


def test_cache_info_and_clear(cache, bfs_trace, tmp_path, capsys):
    run_cli("simulate", bfs_trace, *SIM, "-q", "--json", tmp_path / "r.json")
    code, out, _ = run_cli("cache", "info", "--json", capsys=capsys)
    info = json.loads(out)
    assert code == 0 and info["dir"] == str(cache) and info["enabled"] and info["entries"] == 1
    assert info["bytes"] == _entries(cache)[0].stat().st_size and info["max_bytes"] == 64 << 20
    (cache / "mine.txt").write_text("kept")
    code, out, _ = run_cli("cache", "clear", capsys=capsys)
    assert code == 0 and "removed 1 cached entry" in out
    assert _entries(cache) == [] and (cache / "mine.txt").exists()


def test_an_untrusted_cache_directory_is_not_used(cache, bfs_trace, tmp_path, capsys, monkeypatch):
    run_cli("--no-cache", "simulate", bfs_trace, *SIM, "-q", "--json", tmp_path / "ref.json")
    # A cache directory planted as a symbolic link to someone's directory.
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    monkeypatch.setenv("HUGESCOPE_CACHE_DIR", str(link))
    code, _, err = run_cli("simulate", bfs_trace, *SIM, "--json", tmp_path / "r.json", capsys=capsys)
    assert code == 0 and "note: results cache not used" in err and "symbolic link" in err, err
    assert list(target.iterdir()) == [], "nothing written through the link"
    assert (tmp_path / "r.json").read_bytes() == (tmp_path / "ref.json").read_bytes()
    # A world-writable directory: not used either.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    monkeypatch.setenv("HUGESCOPE_CACHE_DIR", str(open_dir))
    code, _, err = run_cli("simulate", bfs_trace, *SIM, "--json", tmp_path / "r2.json", capsys=capsys)
    assert code == 0 and "mode 0777" in err, err
    assert list(open_dir.iterdir()) == []
    assert (tmp_path / "r2.json").read_bytes() == (tmp_path / "ref.json").read_bytes()


def test_a_curve_reuses_the_reference_and_gives_the_same_table(cache, bfs_trace, monkeypatch):
    kw = dict(budgets=[4, 32], policies=["pcc"], frag_points=[], threads=2)
    monkeypatch.setenv("HUGESCOPE_NO_CACHE", "1")
    off = ex.curve(bfs_trace, **kw)
    monkeypatch.delenv("HUGESCOPE_NO_CACHE")
    from hugescope import _core
    cold = ex.curve(bfs_trace, **kw)
    hits = _core.cache_hits()
    warm = ex.curve(bfs_trace, **kw)
    assert _core.cache_hits() > hits, "the warm curve read the cached reference"
    assert off.to_csv(index=False) == cold.to_csv(index=False) == warm.to_csv(index=False)


def test_static_maps_and_reference_lines_are_reused_and_named(cache, bfs_trace, tmp_path, capsys):
    """A static page-size map and a requested ``ideal`` are reference runs
    too: stored once, then read back (the note names each kind), with the
    same bytes as without the cache."""
    static = ["--preset", "haswell-pcc", "--pages", "2m"]
    outs = {k: tmp_path / f"static-{k}.json" for k in ("off", "cold", "warm")}
    assert run_cli("--no-cache", "simulate", bfs_trace, *static, "--json", outs["off"], "-q")[0] == 0
    code, _, err = run_cli("simulate", bfs_trace, *static, "--json", outs["cold"], capsys=capsys)
    assert code == 0 and "reused" not in err, err
    code, _, err = run_cli("simulate", bfs_trace, *static, "--json", outs["warm"], capsys=capsys)
    assert code == 0 and "reused 1 cached reference run (1 static map all 2m) from the results cache" in err, err
    assert outs["cold"].read_bytes() == outs["off"].read_bytes() == outs["warm"].read_bytes()

    refs = ["--preset", "haswell-pcc", "--policy", "linux", "--policy", "ideal"]
    outs = {k: tmp_path / f"refs-{k}.json" for k in ("off", "cold", "warm")}
    assert run_cli("--no-cache", "simulate", bfs_trace, *refs, "--json", outs["off"], "-q")[0] == 0
    run_cli("simulate", bfs_trace, *refs, "--json", outs["cold"], "-q")
    code, _, err = run_cli("simulate", bfs_trace, *refs, "--json", outs["warm"], capsys=capsys)
    assert code == 0 and "reused 2 cached reference runs (1 base, 1 ideal) from the results cache" in " ".join(err.split()), err
    assert outs["cold"].read_bytes() == outs["off"].read_bytes() == outs["warm"].read_bytes()
    # Another OS knob (a fault cost): other keys, nothing reused.
    code, _, err = run_cli("simulate", bfs_trace, *refs, "--set", "os.fault_base_us=5", "--json", tmp_path / "f.json",
                           capsys=capsys)
    assert code == 0 and "reused" not in err, err
