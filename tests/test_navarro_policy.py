"""The `navarro` policy (reservation-based superpages, Navarro et al.
OSDI'02; issue #12) through the Python API and the CLI on the alpha-21264
preset: reservations are made and filled in place, promotions need no copy,
the counters reach the summary, all sizes do at least as well as one, and a
bad knob is one clear error."""

from __future__ import annotations

import hugescope as hs
from conftest import run_cli


def test_navarro_reserves_and_promotes_in_place_on_alpha(gups_trace):
    r = hs.simulate(gups_trace, preset="alpha-21264", policy="navarro", duration=5.0)
    d = r.to_dict()
    o = d["os_stats"]
    assert o["reservations"] > 0
    assert o["promotions"] > 0 and o["in_place_collapses"] == o["promotions"]
    assert o["pages_copied"] == 0
    assert d["policy_params"]["sizes"] == ["64k", "512k", "4m"] and d["policy_params"]["wp"] is True
    s = r.summary()
    assert s["reservations"] == o["reservations"] and "peak_reserved_frames" in s
    assert s["huge_share"] > 0.9


def test_all_sizes_do_at_least_as_well_as_one_size(gups_trace):
    runs = hs.compare(gups_trace, ["navarro", "navarro:sizes=64k"], preset="alpha-21264", duration=5.0)
    s = {r["label"]: r.summary() for r in runs}
    assert s["navarro"]["xlat_speedup_est"] >= s["navarro:sizes=64k"]["xlat_speedup_est"]
    assert s["navarro"]["xlat_speedup_est"] > 1.5


def test_bad_navarro_knob_is_one_error_line(gups_trace, capsys):
    code, out, err = run_cli("simulate", gups_trace, "--preset", "alpha-21264", "--policy", "navarro:sizes=64q",
                             capsys=capsys)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "sizes=64q" in lines[0], err
