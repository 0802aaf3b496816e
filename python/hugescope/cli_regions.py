"""``hugescope regions TRACE``: where a run's translation cost lies, trace
region by trace region (issue #38), and the table ``advise`` prints too.

One static run (``api.region_profile``, the core's ``region_profile.rs``):
each region's accesses, TLB misses (walks) and share of the run's walk
cycles, most walk cycles first, named by the trace header (and by the
allocation site when the trace recorded one).
"""

from __future__ import annotations

from typing import Any, Dict, List

from rich.markup import escape
from rich.table import Table

from . import api, units

#: Rows the table shows before its "N more" line.
DEFAULT_TOP = 15


def _count(n: int) -> str:
    """A count in at most 6 characters (80-column tables): 9999, 12.3k, 456k, 4.6M."""
    if n < 10_000:
        return str(n)
    for unit, div in (("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)):
        x = n / div
        text = f"{x:.1f}" if x < 99.95 else f"{x:.0f}"
        if float(text) < 1000:
            return text + unit
    return f"{n:.3g}"


def region_label(row: Dict[str, Any]) -> str:
    """A row's region as the table names it: its name, and its allocation
    site's call and size when the trace recorded them."""
    from .cli import _size

    site = row.get("site") or {}
    parts = [str(site[k]) for k in ("call",) if site.get(k)]
    if site.get("size") is not None:
        parts.append(_size(int(site["size"])))
    return row["name"] + (f" ({' '.join(parts)})" if parts else "")


def render_regions(rows: List[Dict[str, Any]], title: str, console, top: int = DEFAULT_TOP) -> None:
    """The regions ``rows`` (``RegionProfile.rows``, most walk cycles first)
    as a table that fits 80 columns: the first ``top``, then one line for
    the rest."""
    from .cli import _size

    # The title as its own line: as a table title it would wrap to the
    # table's width, which is narrow when the names are short.
    console.print(title, soft_wrap=False)
    t = Table()
    t.add_column("region", overflow="fold", ratio=1)
    for c in ("size", "accesses", "walks", "walk cyc."):
        t.add_column(c, justify="right", no_wrap=True)
    for r in rows[:top]:
        size = "-" if r["len"] is None else _size(int(r["len"]))
        t.add_row(escape(region_label(r)), size, _count(r["accesses"]), _count(r["walks"]),
                  f"{100 * r['walk_cycle_share']:.1f}%")
    console.print(t)
    rest = rows[top:]
    if rest:
        share = sum(r["walk_cycle_share"] for r in rest)
        console.print(f"{len(rest)} more regions ({100 * share:.1f}% of walk cycles; --top shows more, --json has "
                      "all)", soft_wrap=False)


def cmd_regions(a) -> int:
    from .cli import _machine_inputs, _machine_label, check_outputs, console, err_console, human_to_stderr
    from ._io import emit_json
    from .progress import progress_share

    from .cli import CliError

    if a.quiet and not a.json:
        raise CliError("-q prints nothing; without --json the run would have no output")
    inputs = [a.trace] + _machine_inputs(a)
    if a.pages.lower() not in ("4k", "2m", "1g") and not a.pages.startswith("ds:") and "+" not in a.pages:
        inputs.append(a.pages)
    check_outputs([(a.json, "json")], inputs)
    with human_to_stderr(a.json):
        with progress_share(f"simulating ({a.pages} pages)", console=err_console) as tick:
            prof = api.region_profile(a.trace, preset=a.preset, pages=a.pages, config=a.config, set=a.set,
                                      progress=tick)
        header = api.trace_info(a.trace)["header"]
        if a.json:
            emit_json(a.json, prof, inputs=inputs)
        if not a.quiet:
            r = prof.record
            t = r.result.translation
            title = (f"{escape(header.get('workload', 'trace'))}, {escape(r.pages)}: {t.accesses:,} accesses, "
                     f"{t.walks:,} walks; walk cycles are estimates of the cost model ({escape(_machine_label(a))})")
            render_regions(prof.rows(header), title, console, top=a.top)
    return 0


def add_commands(sub) -> None:
    from .cli import _add_machine_args, json_option

    p = sub.add_parser("regions", help="each trace region's accesses, walks and share of walk cycles (one static run)",
                       description="Simulate TRACE under a static page map and show, for every region of its "
                                   "header, the accesses, TLB misses (walks) and share of the run's walk cycles, "
                                   "most walk cycles first, plus the accesses outside every region. Walk cycles "
                                   "are estimates of the cost model. See docs/cli.md.")
    p.add_argument("trace", help="trace file (.hst)")
    _add_machine_args(p)
    p.add_argument("--pages", default="4k", help="static page-size map: 4k (default), 2m, 1g, or a plan JSON file")
    p.add_argument("--top", type=units.int_arg("--top", 1, 1 << 20), default=DEFAULT_TOP,
                   help=f"regions shown in the table (default {DEFAULT_TOP}; --json has all)")
    json_option(p, "write the profile and the run's counters to this JSON file")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing (with --json)")
    p.set_defaults(func=cmd_regions)
