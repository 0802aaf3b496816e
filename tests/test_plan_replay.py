"""Issue #15 through the CLI: a plan emitted by `simulate --emit-plan` replays
with `static:plan=` to the policy's walks (promotions between progress points
are recorded as `after_marker`), and the PCC artifact's duplicate L1 fill is a
`--set` machine key, off by default."""

from __future__ import annotations

from conftest import load, run_cli


def _walks(path, counter="walks"):
    return load(path)["translation"][counter]


def test_emitted_bfs_plan_replays_to_the_policys_walks(bfs_trace, tmp_path, capsys):
    plan, pol, rep = tmp_path / "plan.json", tmp_path / "pcc.json", tmp_path / "replay.json"
    code, _, err = run_cli("simulate", bfs_trace, "--policy", "pcc", "--duration", "120", "--no-base", "-q",
                           "--emit-plan", plan, "--json", pol, capsys=capsys)
    assert code == 0, err
    entries = load(plan)["entries"]
    assert entries, "pcc promoted nothing on the bfs trace"
    # bfs reports levels; pcc reads on its own clock, between them.
    assert any("after_marker" in e["when"] for e in entries if isinstance(e["when"], dict)), entries
    code, _, err = run_cli("simulate", bfs_trace, "--policy", f"static:plan={plan}", "--duration", "120",
                           "--no-base", "-q", "--json", rep, capsys=capsys)
    assert code == 0, err
    a, b = _walks(pol), _walks(rep)
    assert abs(a - b) <= 0.01 * a, (a, b)


def test_duplicate_fill_is_a_set_key(bfs_trace, tmp_path, capsys):
    plain, dup = tmp_path / "plain.json", tmp_path / "dup.json"
    base = ["simulate", bfs_trace, "--pages", "4k", "--preset", "pcc-artifact", "-q"]
    assert run_cli(*base, "--json", plain, capsys=capsys)[0] == 0
    assert run_cli(*base, "--set", "l1_duplicate_fill=true", "--json", dup, capsys=capsys)[0] == 0
    # Half the 4KB L1: fewer L1 hits (the L2, which the knob leaves alone, catches the misses).
    assert _walks(dup, "l1_hits") < _walks(plain, "l1_hits")
    assert _walks(dup, "accesses") == _walks(plain, "accesses")
    code, _, err = run_cli(*base, "--set", "l1_duplicate_fill=maybe", "--json", tmp_path / "bad.json", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "maybe" in err and not (tmp_path / "bad.json").exists(), err
