"""The output convention beyond JSON: result tables also as Parquet
(--results-format), figures as PNG, SVG and PDF (--plot-format), every file
with the same normal mode, and the CLI without matplotlib (hugescope[plot])."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from hugescope import _io
from hugescope._core import HugescopeError

from conftest import run_cli


def _mode_all_normal(files):
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o666 & ~umask}, modes


@pytest.fixture(scope="module")
def reuse_all_formats(gups_trace, tmp_path_factory):
    """One `reuse` run (two figures, CSV tables) with every format asked for."""
    out = tmp_path_factory.mktemp("formats") / "r"
    code, _, _ = run_cli("--results-format", "csv,parquet", "--plot-format", "png,svg,pdf",
                         "reuse", gups_trace, "-o", out, "--max-points", "200")
    assert code == 0
    return out


def test_every_csv_has_a_parquet_twin_with_the_same_table(reuse_all_formats):
    csvs = sorted(reuse_all_formats.glob("*.csv"))
    assert csvs
    for c in csvs:
        pq = c.with_suffix(".parquet")
        assert pq.exists(), sorted(reuse_all_formats.iterdir())
        assert pq.read_bytes()[:4] == b"PAR1"
        a, b = pd.read_csv(c), pd.read_parquet(pq)
        pd.testing.assert_frame_equal(a, b)


def test_every_figure_in_every_format(reuse_all_formats):
    pngs = sorted(reuse_all_formats.glob("*.png"))
    assert len(pngs) == 2  # reuse draws the scatter and the per-region bars
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in p.with_suffix(".svg").read_bytes()[:2000]
        assert p.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"


def test_all_output_files_share_one_mode(reuse_all_formats):
    files = sorted(reuse_all_formats.iterdir())
    assert {p.suffix for p in files} >= {".csv", ".parquet", ".json", ".png", ".svg", ".pdf"}
    _mode_all_normal(files)


def test_vector_figures_are_deterministic(gups_trace, tmp_path):
    # No creation date or random ids: the same data gives the same bytes.
    runs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        assert run_cli("--plot-format", "svg,pdf", "reuse", gups_trace, "-o", out, "--max-points", "200")[0] == 0
        runs.append({p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".svg", ".pdf")})
    assert runs[0] and runs[0] == runs[1]
    # Only the formats asked for: no PNG this time.
    assert not list((tmp_path / "r0").glob("*.png"))


def test_default_formats_unchanged(gups_trace, tmp_path):
    out = tmp_path / "r"
    assert run_cli("reuse", gups_trace, "-o", out, "--max-points", "200")[0] == 0
    assert {p.suffix for p in out.iterdir()} == {".csv", ".json", ".png"}


def test_parquet_twin_refused_before_the_work(gups_trace, tmp_path, capsys):
    # A directory where the twin would go: refused by the checks before the
    # sweep, so no CSV or JSON is written either.
    out = tmp_path / "r"
    out.mkdir()
    (out / "reuse-gups.parquet").mkdir()
    code, _, err = run_cli("--results-format", "parquet", "reuse", gups_trace, "-o", out, "--max-points", "200",
                           capsys=capsys)
    assert code == 2 and "reuse-gups.parquet" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in out.iterdir()) == ["reuse-gups.parquet"]


@pytest.mark.parametrize("args, needle", [
    (["--plot-format", "gif", "policies"], "--plot-format: 'gif'"),
    (["--results-format", "csv,xlsx", "policies"], "--results-format: 'xlsx'"),
    (["--plot-format"], "--plot-format needs a value"),
])
def test_bad_format_is_one_error_line(args, needle, capsys):
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 2 and needle in err and err.count("\n") == 1, err


@given(st.lists(st.sampled_from(["png", "svg", "pdf", "PNG", " svg "]), min_size=1, max_size=5))
def test_plot_format_lists_parse_in_order_without_repeats(fmts):
    got = _io.parse_formats(",".join(fmts), _io.PLOT_FORMAT_CHOICES, "--plot-format")
    want = list(dict.fromkeys(f.strip().lower() for f in fmts))
    assert list(got) == want


@given(st.text(min_size=1, max_size=12).filter(lambda s: s.strip().lower() not in ("png", "svg", "pdf")
                                               and "," not in s))
def test_plot_format_rejects_anything_else(fmt):
    with pytest.raises(HugescopeError, match="--plot-format"):
        _io.parse_formats(fmt, _io.PLOT_FORMAT_CHOICES, "--plot-format")


# ---------------------------------------------------------------- plotting is an extra

HIDE_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; from hugescope.cli import main; sys.exit(main())"


def test_cli_runs_without_matplotlib(tmp_path):
    r = subprocess.run([sys.executable, "-c", HIDE_MATPLOTLIB, "policies", "--format", "json"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.lstrip().startswith("["), r.stderr


def test_a_plot_without_matplotlib_says_install_the_extra(gups_trace, tmp_path):
    out = tmp_path / "r"
    r = subprocess.run([sys.executable, "-c", HIDE_MATPLOTLIB, "reuse", gups_trace, "-o", str(out),
                        "--max-points", "200"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "hugescope[plot]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # Said before the work: no result written.
    assert not out.exists() or not any(out.iterdir())
    # Without figures the same command works.
    r = subprocess.run([sys.executable, "-c", HIDE_MATPLOTLIB, "reuse", gups_trace, "-o", str(out),
                        "--max-points", "200", "--no-plots"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- errors off a terminal

def test_long_error_piped_is_not_wrapped(tmp_path):
    # A long path in the message: piped stderr must still get it on one line.
    deep = tmp_path / ("d" * 120) / "x.json"
    r = subprocess.run([sys.executable, "-m", "hugescope", "presets", "--json", str(deep)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and str(deep.parent) in r.stderr, r.stderr


# ---------------------------------------------------------------- sizes

@given(st.integers(0, 4096), st.sampled_from(["k", "K", "KB", "KiB", "kib", "M", "MB", "MiB", "G", "GB", "GiB"]))
def test_sizes_are_binary_for_every_spelling(n, suffix):
    from hugescope import units

    power = {"k": 1, "m": 2, "g": 3}[suffix[0].lower()]
    assert units.parse_size(f"{n}{suffix}") == n * 1024 ** power
    # Counts are decimal: 50M accesses = 50,000,000.
    assert units.parse_count(f"{n}{suffix[0]}") == n * 1000 ** power


# ---------------------------------------------------------------- report and figures

BUDGETS = [0, 1, 2, 4, 8, 16, 32, 64, 100]


def _curve_rows():
    """A utility curve shaped like the demo's: pcc rises to the end, hawkeye
    stays at 1.006x from 16% on, base/ideal references, two Linux points."""
    rows = []
    for b in BUDGETS:
        rows.append({"policy": "pcc", "role": "curve", "budget_pct": b, "frag_pct": 0, "huge_share": b / 100,
                     "speedup_est": 1 + b / 1000, "ptw_rate": 0.2 - b / 1000, "walks": 1000 - b, "promotions": b})
        hs = min(b, 16) / 100
        rows.append({"policy": "hawkeye", "role": "curve", "budget_pct": b, "frag_pct": 0, "huge_share": hs,
                     "speedup_est": 1 + 0.006 * (min(b, 16) / 16), "ptw_rate": 0.2 - hs / 10, "walks": 900,
                     "promotions": int(hs * 100)})
    for pol, sp in (("base", 1.0), ("ideal", 1.2)):
        rows.append({"policy": pol, "role": "reference", "budget_pct": None, "frag_pct": 0,
                     "huge_share": sp - 1, "speedup_est": sp, "ptw_rate": 0.1, "walks": 500, "promotions": 0})
    for frag in (50, 90):
        rows.append({"policy": "linux", "role": "point", "budget_pct": None, "frag_pct": frag,
                     "huge_share": 0.5 - frag / 1000, "speedup_est": 1.1, "ptw_rate": 0.1, "walks": 700,
                     "promotions": 3})
    return rows


def test_flat_baseline_gets_a_note_saying_why():
    from hugescope import report

    notes = report.flat_notes(_curve_rows())
    assert len(notes) == 1, notes  # pcc rises to the end: no note
    assert notes[0].startswith("hawkeye stays at 1.006x") and "from 16% to 100%" in notes[0]
    assert "fixed number of regions per round" in notes[0]
    # A footprint of 20 MiB: one 2MB region is 10% of it, so budgets below
    # hold no huge page, for every policy alike (one note).
    rows = [{**r, "footprint_bytes": 20 << 20} for r in _curve_rows()]
    notes = report.flat_notes(rows)
    assert len(notes) == 2 and notes[1].startswith("every line is flat at budgets 1%, 2%, 4%, 8%: one 2MB region "
                                                   "is 10.0% of the 20.0 MiB footprint"), notes


def test_every_line_and_point_of_a_figure_has_its_own_colour():
    from matplotlib.colors import to_hex

    from hugescope import plots

    fig = plots.plot_curve({"rows": _curve_rows()})
    ax = fig.axes[0]
    lines = {l.get_label(): to_hex(l.get_color()) for l in ax.get_lines()}
    points = [to_hex(c.get_facecolor()[0]) for c in ax.collections]
    assert len(points) == 2
    colours = list(lines.values()) + points
    assert len(set(colours)) == len(colours), (lines, points)
    # One palette by policy name: pcc is pcc's colour in every figure.
    assert lines["pcc"] == plots.policy_colour("pcc")
    multi = plots.plot_multi({"rows": [r for r in _curve_rows() if r["role"] != "point"]})
    assert {l.get_label(): to_hex(l.get_color()) for l in multi.axes[0].get_lines()}["pcc"] == lines["pcc"]


def test_report_shows_terminal_tables_and_flat_notes(tmp_path):
    import json

    from rich.table import Table

    from hugescope import report

    res = tmp_path / "results"
    res.mkdir()
    (res / "curve-x.json").write_text(json.dumps({"hugescope_experiment": "curve", "kind": "estimate",
                                                  "rows": _curve_rows(), "trace": {"workload": "bfs"}}))
    t = Table(title="MMU alone [4KB vs 2MB]")
    t.add_column("workload")
    t.add_column("walks/1k", justify="right")
    t.add_row("bfs", "12.50")
    out = report.build(str(res), str(tmp_path / "r.html"), tables=[t])
    page = open(out).read()
    assert "<h4>MMU alone [4KB vs 2MB]</h4>" in page
    assert '<th>walks/1k</th></tr><tr><td>bfs</td><td class="n">12.50</td></tr>' in page
    assert "hawkeye stays at 1.006x" in page
    _mode_all_normal([tmp_path / "r.html"])


# ---------------------------------------------------------------- progress

def _stderr_on_a_terminal(args, cwd):
    """Run the CLI with stderr on a pseudo-terminal; (exit code, stdout, what the terminal got)."""
    import pty

    master, slave = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "hugescope", *map(str, args)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=slave, cwd=cwd, timeout=120)
    finally:
        os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return r.returncode, r.stdout, seen.decode("utf-8", "replace")


def test_simulate_shows_progress_on_a_terminal_only(gups_trace, tmp_path):
    code, out, tty = _stderr_on_a_terminal(["simulate", gups_trace, "--pages", "2m", "--json", "-"], tmp_path)
    assert code == 0 and out.lstrip().startswith(b"{")  # the result alone on stdout
    # The percentage bar of the core's progress reports (tests/test_progress.py has the counts).
    assert "simulating (2m pages)" in tty, tty
    # Off a terminal no bar is drawn: stderr holds the tables alone.
    r = subprocess.run([sys.executable, "-m", "hugescope", "simulate", gups_trace, "--pages", "2m", "--json", "-"],
                       capture_output=True, cwd=tmp_path)
    assert r.returncode == 0 and b"simulating" not in r.stderr and b"\x1b[" not in r.stderr, r.stderr
