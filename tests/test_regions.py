"""``hugescope regions`` and ``api.region_profile`` (issue #38): each trace
region's accesses, walks and share of walk cycles, from one static run whose
counters are ``simulate``'s byte for byte. The counts by hand are the core's
tests (``region_profile.rs``); here the rows add up to the run, the CLI's
table fits 80 columns, and bad input is one error line."""

from __future__ import annotations

import json

import pytest

import hugescope as hs
from hugescope.results import OUTSIDE
from conftest import load, run_cli


def test_profile_splits_the_run_and_is_simulates_run(bfs_trace):
    p = hs.region_profile(bfs_trace, pages="4k")
    r = hs.simulate(bfs_trace, pages="4k")
    # The same run: the record written by the core is the same bytes.
    assert p.result.to_json() == r.to_json()
    header = hs.trace_info(bfs_trace)["header"]
    rows = p.rows(header)
    assert len(rows) == len(header["regions"]) + 1 and sum(x["name"] == OUTSIDE for x in rows) == 1
    t = r.record.translation
    assert sum(x["accesses"] for x in rows) == t.accesses
    assert sum(x["walks"] for x in rows) == t.walks
    assert sum(x["walk_refs"] for x in rows) == t.walk_refs
    assert sum(x["walk_cycles"] for x in rows) == pytest.approx(p.record.walk_cycles, rel=1e-12)
    assert sum(x["walk_cycle_share"] for x in rows) == pytest.approx(1.0)
    cycles = [x["walk_cycles"] for x in rows]
    assert cycles == sorted(cycles, reverse=True) and cycles[0] > 0
    # BFS walks in more than one of its arrays.
    assert sum(x["walks"] > 0 for x in rows) >= 2
    assert list(p.to_frame().columns) == hs.RegionProfile.COLUMNS


def test_rows_carry_an_allocation_site_when_the_trace_recorded_one(bfs_trace):
    from hugescope.cli_regions import region_label

    p = hs.region_profile(bfs_trace)
    header = hs.trace_info(bfs_trace)["header"]
    top = p.rows()[0]
    site = {"call": "malloc", "size": 3 << 20, "frames": ["make_graph bfs.c:12"], "key": "k"}
    for r in header["regions"]:
        if r["name"] == top["name"] and int(r["base"]) == top["base"]:
            r["site"] = site
    rows = p.rows(header)
    assert rows[0]["site"] == site and all("site" not in x for x in rows[1:])
    assert region_label(rows[0]) == f"{top['name']} (malloc 3 MiB)"
    assert region_label(rows[1]) == rows[1]["name"]


def test_cli_table_json_and_top(bfs_trace, tmp_path, capsys, monkeypatch):
    from rich.console import Console
    from hugescope import cli

    # An 80-column terminal (the CLI's console is 160 wide off a terminal).
    monkeypatch.setattr(cli, "console", Console(width=80))
    code, out, err = run_cli("regions", bfs_trace, "--json", tmp_path / "r.json", capsys=capsys)
    assert code == 0, err
    d = load(tmp_path / "r.json")
    header = hs.trace_info(bfs_trace)["header"]
    assert d["kind"] == "estimate" and d["pages"] == d["result"]["pages"]
    assert len(d["regions"]) == len(header["regions"])
    assert d["result"]["translation"] == json.loads(hs.simulate(bfs_trace).to_json())["translation"]
    lines = out.splitlines()
    assert all(len(x) <= 80 for x in lines), max(lines, key=len)
    assert "walk cyc." in out and "estimates of the cost model" in " ".join(out.split())
    for r in d["regions"][:3]:
        assert r["name"] in out
    code, out, err = run_cli("regions", bfs_trace, "--top", "1", capsys=capsys)
    assert code == 0, err
    n = len(header["regions"])  # + the outside row - the one shown
    assert f"{n} more regions (" in out, out


@pytest.mark.parametrize("args, needle", [
    (["{missing}"], "missing.hst"),
    (["{trace}", "--top", "0"], "--top"),
    (["{trace}", "-q"], "-q prints nothing"),
    (["{trace}", "--pages", "3k"], "3k"),
    (["{trace}", "--preset", "nonesuch"], "nonesuch"),
])
def test_cli_bad_input_is_one_error_line(bfs_trace, tmp_path, capsys, args, needle):
    args = [a.format(missing=tmp_path / "missing.hst", trace=bfs_trace) for a in args]
    code, out, err = run_cli("regions", *args, "--json", tmp_path / "o.json", capsys=capsys) if "-q" not in args \
        else run_cli("regions", *args, capsys=capsys)
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err
    assert "Traceback" not in err and not (tmp_path / "o.json").exists()


def test_counts_fit_six_characters():
    from hugescope.cli_regions import _count

    cases = {0: "0", 9999: "9999", 10_000: "10.0k", 99_949: "99.9k", 99_950: "100k", 999_499: "999k",
             999_500: "1.0M", 5_097_152: "5.1M", 999_950_000: "1.0G", 10**13: "10.0T"}
    assert {n: _count(n) for n in cases} == cases
