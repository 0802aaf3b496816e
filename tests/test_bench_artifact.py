"""The one-configuration bench rows of the PCC authors' model
(``_core.bench_pipeline`` with machine keys): what they simulate and how bad
keys are refused (never their speeds: those are measurements)."""

import json

import pytest

from hugescope import _core, workloads
from hugescope.errors import HugescopeError

ROW = "pcc:replacement=lfu_artifact,artifact_phase=true,flush_on_read=true,interval_accesses=3000"


@pytest.fixture(scope="module")
def gups(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-artifact") / "gups.hst"
    workloads.trace("gups", str(path), limit=4000, size="4MiB", updates=2000)
    return str(path)


def test_artifact_row_simulates_every_access_with_the_machine_keys(gups):
    r = json.loads(_core.bench_pipeline(gups, "pcc-artifact", [ROW], 2, sets=["l1_duplicate_fill=true"]))
    assert r["preset"] == "pcc-artifact"
    assert [row["what"] for row in r["rows"]] == [ROW]
    assert r["decode_only"]["accesses"] == r["rows"][0]["simulate"]["accesses"] == 4000
    # Without keys the call is the one it always was.
    plain = json.loads(_core.bench_pipeline(gups, "pcc-artifact", [ROW], 1))
    assert plain["rows"][0]["simulate"]["accesses"] == 4000


@pytest.mark.parametrize("sets, needle", [
    (["l1_duplicate_fill=maybe"], "l1_duplicate_fill"),
    (["no_such_key=1"], "no_such_key"),
])
def test_bad_machine_keys_are_one_clear_error(gups, sets, needle):
    with pytest.raises(HugescopeError, match=needle):
        _core.bench_pipeline(gups, "pcc-artifact", [ROW], 1, sets=sets)
