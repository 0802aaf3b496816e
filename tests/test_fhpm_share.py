"""FHPM's page-sharing study (Table 2 shape, hugescope.fhpm_share) and its
workload: the paper's ordering on a small run, with the counts the scaled
microbenchmark implies; one error line for bad input; the figure."""
import pytest

import hugescope as hs
from conftest import assert_workload_refused
from hugescope import fhpm_share, studies
from hugescope.errors import HugescopeError


@pytest.fixture(scope="module")
def sharing():
    return fhpm_share.run_sharing(scale="ci")


def by(result):
    return {r["config"]: r for r in result.table.to_dict("records")}


def test_table2_ordering_holds_with_the_hand_counted_savings(sharing):
    b = by(sharing)
    # Two VMs of 32MiB holding the same records: KSM shares every page of one
    # with its twin (half of the 64MiB in use), splitting every huge page.
    assert b["ksm"]["saved_mib"] == 32.0 and b["ksm"]["saved_pct"] == 50.0
    assert (b["ksm"]["huge_a"], b["ksm"]["huge_b"]) == (0.0, 0.0)
    assert b["ksm"]["huge_splits"] == 32 and b["ksm"]["merges"] == 8192
    assert b["ksm"]["perf_a"] < 0.97 and b["ksm"]["perf_b"] < 0.97
    # Ingens-style: only the cold quarter's huge pages look cold (the
    # unbalanced hot half looks wholly hot: FHPM's hot bloat): 8MiB saved,
    # 75% of each VM still huge, performance nearly unchanged.
    assert b["ingens-share"]["saved_mib"] == 8.0 and b["ingens-share"]["saved_pct"] == 12.5
    assert (b["ingens-share"]["huge_a"], b["ingens-share"]["huge_b"]) == (0.75, 0.75)
    assert b["ingens-share"]["perf_a"] > 0.99
    # Records shuffled at 4KB granularity: no 2MB page is identical; and
    # every page was written, so none is zero.
    for k in ("hpshare", "zeroscan"):
        assert b[k]["saved_mib"] == 0.0 and (b[k]["huge_a"], b[k]["huge_b"]) == (1.0, 1.0)
        assert b[k]["perf_a"] == 1.0
    assert b["no sharing"]["perf_a"] == 1.0
    # FHPM-Share (savings first): the cold quarter and the unbalanced half
    # (PSR 0.9: split, then every page merges with its twin, read-only) are
    # shared, 24MiB; the balanced hot quarter stays huge (Table 2: 21%).
    assert b["fhpm-share"]["saved_mib"] == 24.0 and b["fhpm-share"]["saved_pct"] == 37.5
    assert (b["fhpm-share"]["huge_a"], b["fhpm-share"]["huge_b"]) == (0.25, 0.25)
    assert b["ksm"]["perf_a"] < b["fhpm-share"]["perf_a"] < 1.0
    checks = sharing.checks()
    assert len(checks) == 9 and all(c["holds"] is True for c in checks), checks
    assert fhpm_share.headline(sharing)["claims"] == "PASS"


def test_a_run_without_ksm_cannot_pass_the_ksm_claims():
    rows = [{"config": "hpshare", "saved_pct": 0.0, "huge_a": 1.0, "huge_b": 1.0},
            {"config": "ksm", "saved_pct": 0.0, "huge_a": 1.0, "huge_b": 1.0, "perf_a": 1.0, "perf_b": 1.0}]
    got = {c["claim"]: c["holds"] for c in fhpm_share.shape_checks("sharing", rows)}
    assert got["KSM saves the most memory (Table 2: 46.4%)"] is False
    assert got["KSM loses most huge pages (Table 2: 0% / 1% left)"] is False
    assert got["the zero-page scan saves little (Table 2: 0.8%)"] is None


def test_study_is_saved_with_its_figure(sharing, tmp_path):
    pytest.importorskip("matplotlib")
    paths = studies.save_study(sharing.experiment, sharing.meta, sharing.table, str(tmp_path), sharing.experiment,
                               sharing.extra, sharing.checks())
    assert (tmp_path / "fhpm-sharing.csv").exists() and (tmp_path / "fhpm-sharing-checks.csv").exists()
    assert (tmp_path / "fhpm-sharing.png").stat().st_size > 1000, paths


def test_bad_scale_is_one_error():
    with pytest.raises(HugescopeError) as e:
        fhpm_share.run_sharing(scale="huge")
    assert "scale" in str(e.value) and len(str(e.value).splitlines()) == 1


def test_sharemicro_refuses_bad_parameters(capsys, tmp_path):
    assert_workload_refused("sharemicro", {"size": "12MiB"}, "size", capsys, tmp_path)
    assert_workload_refused("sharemicro", {"psr": 1.5}, "psr", capsys, tmp_path)


def test_sharemicro_declares_its_contents(tmp_path):
    path = tmp_path / "s.hst"
    hs.workloads.trace("sharemicro", str(path), size="8MiB", reads=1000, order=0)
    labels = [m["label"] for m in hs.trace_info(str(path))["summary"]["markers"]]
    # In record order: one declaration covers the whole dataset, after its population.
    content = [l for l in labels if l.startswith("content:")]
    assert len(content) == 1 and content[0].endswith(":800000:1:0"), content
    assert labels.index(content[0]) > labels.index(next(l for l in labels if l.startswith("populate:")))
