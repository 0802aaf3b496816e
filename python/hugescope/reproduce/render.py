"""The reproduction table as HTML (a report section, and a page of its own)
and as a terminal table. Nothing is computed here: every cell is a field of
the core's rows."""
from __future__ import annotations

import html
from typing import Any, Dict, List

#: Background of each verdict's cell.
COLOURS = {"reproduced": "#d8f0dc", "shape": "#fff1c7", "not reproduced": "#f8d7d4", "input": "#e3e6ef",
           "not attempted": "#f1f1f1"}
RICH = {"reproduced": "green", "shape": "yellow", "not reproduced": "red", "input": "blue", "not attempted": "dim"}
VERDICTS = list(COLOURS)

RULES = ("<b>Verdicts</b> (computed by the core, <code>hugescope_core::reproduce</code>): <i>reproduced</i> = the mean "
         "over seeds is within the row's tolerance (default for a speedup or overhead: its gain, x&nbsp;-&nbsp;1 or the "
         "percentage, within 25%, or 2 points when the paper's is under 10%); <i>shape</i> = outside it, but the row's "
         "ordering holds with a margin larger than the spread over at least 3 seeds; <i>input</i> = the paper's number "
         "set a parameter of the run, so the row cannot count; <i>not attempted</i> = no value, with the reason. "
         "hugescope values are estimates of the cost model; the paper's are its measurements.")


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def summary(data: Dict[str, Any]) -> str:
    counts = data.get("counts") or {}
    out = ["<table><tr><th>paper</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS) + "<th>rows</th>"
           "<th>reproduced of judged</th></tr>"]
    for p, c in counts.items():
        judged = sum(c.get(v, 0) for v in ("reproduced", "shape", "not reproduced"))
        share = f"{c.get('reproduced', 0)}/{judged}" if judged else "-"
        out.append(f"<tr><td>{_e(p)}</td>" + "".join(f'<td class="n" style="background:{COLOURS[v]}">{c.get(v, 0)}</td>'
                                                      for v in VERDICTS)
                   + f'<td class="n">{sum(c.values())}</td><td class="n">{share}</td></tr>')
    out.append("</table>")
    return "".join(out)


def table(rows: List[Dict[str, Any]]) -> str:
    out = ["<table><tr><th>figure</th><th>series</th><th>metric</th><th>paper</th><th>hugescope (estimate)</th>"
           "<th>verdict</th><th>why</th></tr>"]
    for r in rows:
        how = "".join(f"<b>{k}:</b> {_e(r.get(f))}<br>" for k, f in (
            ("tolerance", "tolerance"), ("reading", "reading"), ("inputs", "sources"), ("command", "command"),
            ("paper's words", "quote"), ("row", "id")) if r.get(f))
        why = _e(r.get("reason"))
        if r.get("note"):
            why += f'<br><span class="note">{_e(r["note"])}</span>'
        why += f"<details><summary>how</summary>{how}</details>"
        v = r.get("verdict")
        out.append(f"<tr><td>{_e(r.get('figure'))} ({_e(r.get('section'))})</td><td>{_e(r.get('series'))}</td>"
                   f"<td>{_e(r.get('metric'))}</td><td class=\"n\">{_e(r.get('paper_text'))}</td>"
                   f"<td class=\"n\">{_e(r.get('value_text'))}</td>"
                   f'<td style="background:{COLOURS.get(v, "#fff")}">{_e(v)}</td><td>{why}</td></tr>')
    out.append("</table>")
    return "".join(out)


def section(data: Dict[str, Any]) -> str:
    """The body of the report's section: rules, counts, one table per paper."""
    seeds = data.get("seeds") or []
    parts = [f'<p class="note">Scale <b>{_e(data.get("scale"))}</b>, workload seeds {_e(", ".join(map(str, seeds)))}. '
             f"{RULES}</p>", summary(data)]
    for p in data.get("papers", []):
        rows = [r for r in data.get("rows", []) if r.get("paper") == p]
        parts.append(f"<h3>{_e(p)}</h3>" + table(rows))
    return "".join(parts)


def page(data: Dict[str, Any]) -> str:
    """A self-contained page of the table (``reproduction.html``)."""
    from ..report import CSS

    title = f"hugescope reproduction: {', '.join(data.get('papers', []))} at {data.get('scale')} scale"
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<p class="note">hugescope {_e(data.get("hugescope_version"))}</p>{section(data)}</body></html>\n')


def rich_tables(r) -> list:
    """The terminal's tables: the counts, then one table per paper."""
    from rich.markup import escape
    from rich.table import Table

    out = []
    t = Table(title=f"Reproduction at {r.meta['scale']} scale, seeds {', '.join(map(str, r.meta['seeds']))}: rows per "
                    "verdict (hugescope values are estimates)")
    t.add_column("paper")
    for v in VERDICTS:
        t.add_column(v, justify="right")
    for p, row in r.counts().iterrows():
        t.add_row(p, *[str(int(row[v])) for v in VERDICTS])
    out.append(t)
    for p in r.meta["papers"]:
        t = Table(title=f"{p}: the paper's numbers beside hugescope's")
        for c in ("figure", "series", "metric", "paper", "hugescope", "verdict"):
            t.add_column(c, justify="right" if c in ("paper", "hugescope") else "left")
        for rec in r.rows[r.rows["paper"] == p].to_dict("records"):
            v = rec["verdict"]
            t.add_row(escape(rec["figure"]), escape(rec["series"]), escape(rec["metric"]), escape(rec["paper_text"]),
                      escape(rec["value_text"]), f"[{RICH[v]}]{v}[/]")
        out.append(t)
    return out


def markdown(data: Dict[str, Any], paper: str, reasons: bool = True, verdicts=None) -> str:
    """One paper's rows as a Markdown table (docs/reproduction.md quotes
    these); ``verdicts``: only the rows with one of these verdicts."""
    def cell(v: Any) -> str:
        return str(v if v is not None else "").replace("|", "\\|").replace("\n", " ")

    head = ["row", "figure", "series", "metric", "paper", "hugescope (estimate)", "verdict"] + (["why"] if reasons else [])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in data.get("rows", []):
        if r.get("paper") != paper or (verdicts is not None and r.get("verdict") not in verdicts):
            continue
        cells = [r.get("id"), f"{r.get('figure')} ({r.get('section')})", r.get("series"), r.get("metric"),
                 r.get("paper_text"), r.get("value_text"), r.get("verdict")]
        if reasons:
            why = r.get("reason") or ""
            if r.get("note") and r.get("verdict") in ("shape", "not reproduced"):
                why += f" ({r['note']})"
            cells.append(why)
        out.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n"
