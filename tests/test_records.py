"""Typed results across the boundary (issue #32 item 3): the core's Records,
the JSON the core writes from them, and the trace reader into numpy."""

import json
import pickle
import random
import struct

import pytest

import hugescope as hs
from hugescope import _core, cli, trace_reader
from hugescope.results import SimResult


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("records") / "g.hst"
    hs.workloads.trace("gups", str(p), size="4MiB", updates=20000, seed=1)
    return str(p)


def test_float_repr_is_pythons():
    # The result files keep Python's float form: positional for decimal
    # exponents -4..15, else d.ddde[+-]XX with two exponent digits at least.
    rng = random.Random(7)
    values = [0.0, -0.0, 1.0, 100.0, 1e16, 1e15, 9999999999999998.0, 1e-5, 1e-4, 0.0001234, 1.5e300, 5e-324,
              1 / 3, 2.5e-7, -123456.789, 1e22, 123456789012345678.0]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(20000)]
    for x in values:
        if x == x and abs(x) != float("inf"):
            assert _core.float_repr(x) == repr(x), x


def test_record_json_is_json_dumps_of_its_dict():
    data = {"text": "h\u00e9llo \u2603 \U0001F600 \x7f \x01 \"q\" \\", "nested": [[], {}, [1, 2.5, {"c": None}]],
            "neg": -3, "big": 1e16, "small": 1e-05, "flag": True, "order": {"z": 1, "a": 2}}
    rec = _core.Record.from_json(json.dumps(data))
    assert rec.to_dict() == data
    assert list(rec.order._fields()) == ["z", "a"]  # the order written, not sorted
    for indent in (None, 2):
        assert rec.to_json(indent) == json.dumps(data, indent=indent)
    assert pickle.loads(pickle.dumps(rec)) == rec
    with pytest.raises(_core.HugescopeError, match="expected an object"):
        _core.Record.from_json("[1, 2]")


def test_results_are_read_by_attribute(small_trace):
    r = hs.simulate(small_trace, pages="4k")
    t = r.record.translation
    assert t.accesses == 40_000 and t.l1_hits + t.l2_hits + t.walks == t.accesses
    assert r.record.cost.kind == "estimate"
    assert r.summary()["walks"] == t.walks == r["translation"]["walks"]
    with pytest.raises(AttributeError, match="walkz"):
        t.walkz
    assert "walks" in t and "virt" not in r.record
    assert t._fields()[:2] == ["accesses", "reads"]
    # Saved and read back: the same record, and the same bytes written.
    again = SimResult(json.loads(r.to_json()))
    assert again.record == r.record and again.to_json() == r.to_json()
    assert r.to_json() == json.dumps(r.to_dict(), indent=2)


def test_policy_results_and_the_cli_json_are_the_cores(small_trace, tmp_path):
    res = hs.compare(small_trace, ["linux", "pcc"], duration=1.0)
    for r in res:
        d = r.record
        assert d.label in ("linux", "pcc")
        assert r.summary()["promotions"] == d.os_stats.promotions
        assert sum(d.os_stats.promotion_failures._values()) >= 0
        assert r.to_json() == json.dumps(r.to_dict(), indent=2)
    out = tmp_path / "r.json"
    code = cli.main(["simulate", small_trace, "--policy", "linux", "--policy", "pcc", "--duration", "1",
                        "--json", str(out), "-q"])
    assert code == 0
    text = out.read_text()
    assert text == json.dumps([r.to_dict() for r in res], indent=2) + "\n"


def test_trace_chunks_sum_to_the_footer(small_trace):
    parts = list(trace_reader.chunks(small_trace))
    info = hs.trace_info(small_trace)
    assert sum(len(p) for p in parts) == info["summary"]["accesses"] == 40_000
    assert sum(int(p["write"].sum()) for p in parts) == info["summary"]["writes"]
    assert trace_reader.ACCESS_DTYPE.itemsize == _core.TRACE_RECORD_BYTES == 13
    with pytest.raises(_core.HugescopeError, match="trace"):
        trace_reader.read_header(42)
