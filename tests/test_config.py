"""Configuration as data: one Config (machine, os, policies) from TOML/JSON.

The knob tests walk the core's declarations (``hugescope.configuration.knobs()``), so
a knob added there is checked here (listing, --set, the Python object) with no
edit to this file."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hugescope as hs
from hugescope.configuration import Config, knobs

from conftest import run_cli

KNOBS = knobs()


@pytest.mark.parametrize("knob", KNOBS, ids=[k["name"] for k in KNOBS])
def test_every_declared_knob_is_listed_settable_and_in_the_object(knob, capsys):
    name, example = knob["name"], knob["example"]
    # Listed by `hugescope config --keys` with its declaration.
    code, out, _ = run_cli("config", "--keys", "--json", capsys=capsys)
    assert code == 0
    assert {k["name"]: k for k in json.loads(out)}[name]["help"] == knob["help"]
    # Accepted by --set and shown in the resolved configuration (JSON and TOML).
    code, out, err = run_cli("config", "--json", "--set", f"os.{name}={example}", capsys=capsys)
    assert code == 0, err
    shown = json.loads(out)["os"][name]
    assert shown is not None
    code, out, err = run_cli("config", "--set", f"os.{name}={example}", capsys=capsys)
    assert code == 0 and f"\n{name} = " in out, out
    # A field of the Python object, with the same value.
    cfg = hs.config(set=[f"os.{name}={example}"])
    assert getattr(cfg.os, name) == shown == cfg.os[name]
    # Refused when it makes no sense, with the key named.
    code, _, err = run_cli("config", "--set", f"os.{name}=[junk]", capsys=capsys)
    assert code == 2 and f"os.{name}=[junk]" in err and len(err.strip().splitlines()) == 1, err


def test_config_object_round_trips_through_toml_and_json(tmp_path):
    cfg = hs.config(preset="sandybridge-ds", set=["os.budget=4%", "os.frag=0.5", "os.duration=120",
                                                  "os.fault_base_us=2.5", "cost.walk_ref_cycles=40"],
                    policies=["pcc:entries=64,demotion=true", "linux:enabled=never+pcc", "hawkeye"])
    assert cfg.os.budget == 0.04 and cfg.os.frag_method == "pcc" and cfg.os.memory is None
    assert cfg.machine["preset"] == "sandybridge-ds" and cfg.machine["cost"]["walk_ref_cycles"] == 40.0
    assert [p.get("label", p["name"]) for p in cfg.policies] == [
        "pcc:entries=64,demotion=true", "linux:enabled=never+pcc", "hawkeye"]
    (tmp_path / "run.toml").write_text(cfg.to_toml())
    (tmp_path / "run.json").write_text(json.dumps(cfg.to_dict()))
    assert hs.config(file=tmp_path / "run.toml") == cfg
    assert hs.config(file=str(tmp_path / "run.json")) == cfg
    assert hs.config(file=cfg) == cfg
    assert hs.config(file=cfg, set=["os.seed=9"]).os.seed == 9


def test_simulate_from_a_config_file_gives_the_bytes_of_the_flags(bfs_trace, tmp_path, capsys):
    flags = ["--policy", "pcc", "--policy", "hawkeye", "--policy", "linux:enabled=always", "--duration", "120",
             "--budget", "4%", "--frag", "0.5", "--os", "fault_base_us=2.5", "--memory", "256MiB", "--seed", "7"]
    code, _, err = run_cli("simulate", bfs_trace, *flags, "--json", tmp_path / "a.json", "-q", capsys=capsys)
    assert code == 0, err
    # The same run written as a file by `hugescope config` (all three sections).
    code, text, err = run_cli("config", "--policy", "pcc", "--policy", "hawkeye", "--policy", "linux:enabled=always",
                              "--set", "os.duration=120", "--set", "os.budget=4%", "--set", "os.frag=0.5",
                              "--set", "os.fault_base_us=2.5", "--set", "os.memory=256MiB", "--set", "os.seed=7",
                              capsys=capsys)
    assert code == 0, err
    assert "[machine]" in text and "[os]" in text and "[[policy]]" in text
    (tmp_path / "run.toml").write_text(text)
    code, _, err = run_cli("simulate", bfs_trace, "--config", tmp_path / "run.toml", "--json", tmp_path / "b.json",
                           "-q", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    # The Python API with a Config object: the same results.
    res = hs.compare(bfs_trace, config=hs.config(file=tmp_path / "run.toml"))
    assert json.loads((tmp_path / "a.json").read_text()) == [r.to_dict() for r in res]


def test_old_machine_only_files_still_load(tmp_path, capsys):
    old = tmp_path / "old.toml"
    old.write_text('preset = "sandybridge-ds"\n[cost]\nwalk_ref_cycles = 31.5\n[l2."4k"]\nentries = 1024\n')
    cfg = hs.config(file=old)
    assert cfg.machine["name"] == "sandybridge-ds" and cfg.machine["cost"]["walk_ref_cycles"] == 31.5
    assert cfg.policies == [] and cfg.os.seed == 1
    assert hs.machine_config(config=old) == {k: v for k, v in cfg.machine.items() if k != "preset"}


@pytest.mark.parametrize("text,needles", [
    ("[os]\nbugdet = 0.1\n", ["os.bugdet", "unknown key"]),
    ("[os]\nseed = \"x\"\n", ["os.seed=x"]),
    ("[os]\nbudget = 2\n", ["os.budget=2", "out of range"]),
    ("[[policy]]\nname = \"pcc\"\nentries = \"x\"\n", ["policy[1]", "entries=x"]),
])
def test_bad_file_is_one_error_naming_key_and_file(text, needles, gups_trace, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    for argv in (["config", "--config", bad], ["simulate", gups_trace, "--config", bad, "--policy", "linux"]):
        code, out, err = run_cli(*argv, capsys=capsys)
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and str(bad) in err, err
        for n in needles:
            assert n in err, err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from([k["name"] for k in KNOBS] + ["nosuch", "", "budget.x"]),
       value=st.sampled_from(["", "auto", "-1", "nan", "inf", "1e400", "4%", "x", "18446744073709551616", "0", "1",
                              "[1]", "pcc", "64MiB", "\u00bd"]) | st.text(max_size=8))
def test_any_os_override_is_accepted_or_one_error(key, value, capsys):
    code, out, err = run_cli("config", "--json", "--set", f"os.{key}={value}", capsys=capsys)
    if code == 0:
        assert key in json.loads(out)["os"]
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
