"""One self-contained HTML page from a results directory.

Everything is inline: figures are base64 PNG ``data:`` URIs, the style sheet is
in the page, and there is no script, font, or link to anything outside it, so
the page opens the same offline, attached to a mail, or years later.

Every result number carries its provenance: "estimate (cost model)" for the
simulator's outputs, "measurement" for numbers measured (on the trace, like
reuse distances, or on real Linux: a results file or row with
``"kind": "measurement"``).
"""

from __future__ import annotations

import base64
import datetime
import html
import json
import os
from typing import Any, Dict, List, Optional

from . import _core
from ._core import HugescopeError
from ._io import write_atomic
from .experiments import KIND_LABEL, load_dir
from .fhpm_study import COLUMNS as FHPM_COLUMNS
from .navarro_study import COLUMNS as NAVARRO_COLUMNS
from .virt_study import COLUMNS as VIRT_COLUMNS
from .studies import VERDICT

TITLES = {
    "reproduction": "Reproduction: each paper's numbers beside hugescope's, with verdicts (docs/reproduction.md)",
    "curve": "Utility curves (PCC paper Fig. 5)",
    "frag": "Fragmentation (PCC paper Fig. 7)",
    "sensitivity": "PCC size sensitivity (PCC paper Fig. 6)",
    "reuse": "Page reuse distance (PCC paper Fig. 2)",
    "multi": "Multithread / multiprocess promotion policies (PCC paper Figs. 8-9)",
    "validate": "Validation: predicted vs measured speedup of top-k plans (real Linux)",
    "validate-suite": "Validation suite: predicted vs measured speedup over workloads, leave-one-workload-out "
                      "(real Linux)",
    "ds-tables": "Direct segments: Tables 4 and 5 and GUPS scaling (Basu et al. ISCA'13)",
    "ingens-bloat": "Ingens: memory bloat, Tables 5/10 (Kwon et al. OSDI'16)",
    "ingens-async": "Ingens: synchronous vs asynchronous-only promotion, Table 4 (OSDI'16)",
    "ingens-fault-latency": "Ingens: page-fault latency, §3.1 (OSDI'16)",
    "ingens-fairness": "Ingens: fairness between processes, Fig. 5 (OSDI'16)",
    "ingens-fragmented": "Ingens: fragmented memory, Table 9 (OSDI'16)",
    "navarro-best-case": "Reservation-based superpages: best case, Table 1 (Navarro et al. OSDI'02)",
    "navarro-sizes": "Reservation-based superpages: one size vs all sizes, Tables 2/3 (OSDI'02)",
    "navarro-preemption": "Reservation-based superpages: preemption with only 4MB available, §6.6 (OSDI'02)",
    "navarro-writeback": "Reservation-based superpages: dirty superpages and write-back, §6.7 (OSDI'02)",
    "navarro-sustained": "Reservation-based superpages: sustained benefit under a page daemon, §6.5 (OSDI'02)",
    "navarro-mthp": "Multi-size THP today: folio sizes and contiguous-PTE coalescing (arm64)",
    "fhpm-monitoring": "FHPM: access monitors, memory per frequency bin, Table 4 (fine-grained huge pages for VMs)",
    "fhpm-hp-policy": "FHPM: hot-page-pressure policy vs fixed thresholds, Fig 8's microbenchmark",
    "fhpm-split-collapse": "FHPM: VM exits of Linux's and the VM-friendly split/collapse, Table 6",
    "fhpm-tmm": "FHPM: tiered memory, FHPM-TMM vs HMM-v-Huge and HMM-v-Base as hot pages become unbalanced, Fig 2",
    "fhpm-sharing": "FHPM: page sharing, FHPM-Share vs KSM, Ingens-style, huge-page and zero-page sharing, Table 2",
    "virt-nested": "Virtualization: huge pages in host and guest, nested walks (Ingens OSDI'16 Table 3 shape)",
    "virt-ds-virt": "Virtualization: direct segments in a VM, guest / VMM / both (ISCA'13 §3.3, an extension)",
}

#: What each Navarro study's table shows and where its numbers come from.
NAVARRO_NOTES = {
    "navarro-best-case": "Alpha 21264 preset (8KB base; 64KB, 512KB, 4MB; 128-entry fully associative DTLB), memory "
                         "plentiful. Pages per size at the end of the run; DTLB misses = page walks; speedup = the "
                         "cost model's over base pages (estimate). Paper columns: Table 1 (measured on the Alpha).",
    "navarro-sizes": "Each superpage size alone (navarro:sizes=...) and all sizes. Paper columns: Tables 2/3.",
    "navarro-preemption": "A 4MB-stride toucher on a machine whose memory is one 4MB extent (§6.6): reservations "
                          "made, preempted and preferred-size failures; speedup over base pages on the same memory.",
    "navarro-writeback": "Bytes written back at the file's msync: with the write-protect trap only the written pages "
                         "are dirty; without it every dirty superpage is written whole. The flush waits for its "
                         "writes: os.writeback_us (5 ms, estimate) per base page written.",
    "navarro-sustained": "A key-value server beside four FFTW runs started one after another in 80 MiB; the page "
                         "daemon in approximate-LRU order against Navarro's contiguity-aware one. Superpage memory "
                         "at each run's peak; contiguity = Fig. 5's metric, mean from the first run's start.",
    "navarro-mthp": "arm64-mthp preset (Cortex-A76/N1 TLBs): Linux's PMD-only THP, mTHP folios of one size or all, "
                    "and Navarro's reservations, each with contpte coalescing (64KB TLB entries) and without.",
}

#: What each Ingens study's table shows and where its numbers come from.
INGENS_NOTES = {
    "ingens-bloat": "RSS = resident memory at the end of the run (huge pages count whole); bloat = RSS / the RSS "
                    "the same run has with base pages only. Throughput = the cost model's speedup over base pages "
                    "(estimate). Paper columns: Table 10 (Redis, 2M keys of 8KB, 70% deleted).",
    "ingens-async": "Synchronous = huge pages at fault time (Linux 4.3, defrag=always); asynchronous only = "
                    "khugepaged alone. Run time = the base-page run's virtual time / the estimated speedup; "
                    "promotion speed = bytes promoted by khugepaged per second of the run. Paper columns: Table 4.",
    "ingens-fault-latency": "Mean latency = time in the fault handler (OS cost model, including synchronous "
                            "compaction) / faults. Fallback share = huge faults that fell back to a base page / "
                            "huge faults tried. Paper columns: §3.1 (10 GB mapping read sequentially).",
    "ingens-fairness": "Three identical processes run concurrently, each on its own virtual time (cycles), on "
                       "memory at FMFI 0.9 with huge pages for 40% of their footprint; both promote "
                       "asynchronously (Linux: khugepaged; Ingens: Promote-kth), with the daemons' periods scaled "
                       "down 200-500x to the short run. Finish time = the process's virtual time when its trace "
                       "ends (estimate).",
    "ingens-fragmented": "FMFI 0.9 made with Ingens' method (allocate, then free part), the pages left behind "
                         "unmovable. Throughput = the cost model's speedup over base pages on the same memory "
                         "(estimate); compaction counts and fault time (compaction stalls included) from the OS "
                         "model. Paper columns: Table 9 (Cloudstone, req/s).",
}

#: Columns shown per experiment (all present in the saved rows).
COLUMNS = {
    **{f"navarro-{k}": v for k, v in NAVARRO_COLUMNS.items()},
    **{f"fhpm-{k}": v for k, v in FHPM_COLUMNS.items()},
    **{f"virt-{k}": v for k, v in VIRT_COLUMNS.items()},
    "curve": ["policy", "role", "budget_pct", "frag_pct", "huge_share", "promotions", "walks", "ptw_rate",
              "speedup_est"],
    "frag": ["policy", "frag_pct", "fmfi", "huge_share", "promotions", "promotion_failures", "walks", "ptw_rate",
             "speedup_est"],
    "sensitivity": ["policy", "role", "size", "budget_pct", "huge_share", "promotions", "walks", "ptw_rate",
                    "speedup_est"],
    "reuse": ["region", "pid", "pages", "accesses", "single_access_pages", "class", "class_pages", "page_share",
              "access_share", "mean_rd_4k", "mean_rd_2m"],
    "multi": ["policy", "role", "budget_pct", "huge_share", "promotions", "walks", "ptw_rate", "speedup_est"],
    "validate": ["policy", "k", "regions", "quantity", "speedup", "speedup_min", "speedup_max", "rank", "coverage",
                 "collapsed"],
    "validate-suite": ["workload", "plan", "sources", "regions", "quantity", "speedup", "speedup_min", "speedup_max",
                       "abs_error", "ranked", "tie_group", "collapsed", "coverage", "sim_walk_refs"],
    "ds-tables": ["workload", "4KB %", "2MB %", "1GB %", "DS derived %", "DS linear %", "DS simulated %", "DS+2MB %",
                  "f_DS %",
                  "paper 4KB %", "paper 2MB %", "paper 1GB %", "paper f_DS %", "paper DS %"],
    "ingens-bloat": ["config", "policy", "rss_bytes", "base_rss_bytes", "bloat", "speedup_est", "huge_share",
                     "promotions", "demotions", "paper_rss_gb", "paper_kops"],
    "ingens-async": ["config", "policy", "run_time_est_s", "speedup_est", "huge_bytes_peak", "huge_at_fault_bytes",
                     "promoted_bytes", "promotion_mb_per_s", "paper_run_s", "paper_speedup", "paper_huge_mb",
                     "paper_promotion"],
    "ingens-fault-latency": ["config", "policy", "mean_fault_us", "latency_vs_base", "faults_base", "faults_huge",
                             "fault_fallbacks", "fallback_share", "compactions", "paper_latency_us",
                             "paper_fallback_share"],
    "ingens-fairness": ["config", "policy", "pid", "finish_seconds", "huge_bytes", "huge_share", "accesses"],
    "ingens-fragmented": ["memory", "config", "policy", "speedup_est", "huge_share", "compactions",
                          "compaction_migrated_pages", "fault_seconds", "promotions", "paper_req_s"],
}
SHARES = {"huge_share", "ptw_rate", "page_share", "access_share", "walk_reduction", "coverage"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;
color:#1b1b1b;line-height:1.4}
h1{font-size:1.6em;margin-bottom:0} h2{margin-top:2em;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{font-size:1.05em;margin-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:0.85em;display:block;overflow-x:auto;max-width:100%} th,td{border:1px solid #ccc;padding:3px 7px}
th{background:#f1f1f1;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.est{background:#fff4d6;color:#7a5200;border-radius:3px;padding:1px 5px;font-size:0.8em;white-space:nowrap}
.meas{background:#dff3e3;color:#14591f;border-radius:3px;padding:1px 5px;font-size:0.8em;white-space:nowrap}
figure{margin:12px 0} figcaption{font-size:0.85em;color:#444} img{max-width:100%;border:1px solid #eee}
details{margin:6px 0} summary{cursor:pointer;font-weight:600} .note{color:#555;font-size:0.9em}
code{background:#f4f4f4;padding:0 3px}
"""


def _badge(kind: str) -> str:
    k = "measurement" if str(kind).startswith("measurement") else "estimate"
    return f'<span class="{"meas" if k == "measurement" else "est"}">{html.escape(KIND_LABEL[k])}</span>'


def _fmt(col: str, v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if col in SHARES:
            return f"{100 * v:.2f}%"
        if col.startswith("speedup"):
            return f"{v:.3f}x"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.3f}" if abs(v) < 1e6 else f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def _table(rows: List[Dict[str, Any]], columns: Optional[List[str]], default_kind: str) -> str:
    if not rows:
        return '<p class="note">(no rows)</p>'
    cols = [c for c in (columns or list(rows[0].keys())) if any(c in r for r in rows) and c != "kind"]
    out = ["<table><tr>"] + [f"<th>{html.escape(c)}</th>" for c in cols] + ["<th>kind</th></tr>"]
    for r in rows:
        out.append("<tr>")
        for c in cols:
            v = r.get(c)
            cls = ' class="n"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            out.append(f"<td{cls}>{_fmt(c, v)}</td>")
        out.append(f"<td>{_badge(r.get('kind') or default_kind)}</td></tr>")
    out.append("</table>")
    return "".join(out)


#: Why a policy's line can stay flat across the budget axis (the budget
#: only caps; a policy that never reaches the cap is limited by its own pace).
FLAT_WHY = {
    "hawkeye": "HawkEye promotes at most a fixed number of regions per round (promotions_per_round, default 8, "
               "PCC paper §5) and sleeps 30 windows between rounds, so in a run of this length it promotes the "
               "same regions whatever the budget; a larger budget is never used",
    "linux": "khugepaged scans a fixed number of pages per period, so within the run it promotes the same regions "
             "at every budget; a larger budget is never used",
    "ingens": "Promote-kth runs at a fixed rate (Ingens §3.3), so within the run it promotes the same regions at "
              "every budget; a larger budget is never used",
}


def flat_notes(rows: List[Dict[str, Any]]) -> List[str]:
    """One note per curve line that stays flat from some budget on: the same
    speedup and huge-page share at every budget from there to the largest,
    with the reason (``FLAT_WHY``, or the general one: the policy promotes at
    its own pace and stops short of the cap)."""
    curves: Dict[str, List[Dict[str, Any]]] = {}
    for r in rows:
        if r.get("role") == "curve" and r.get("budget_pct") is not None:
            curves.setdefault(str(r["policy"]), []).append(r)
    notes = []
    for pol, rs in curves.items():
        rs = sorted(rs, key=lambda r: r["budget_pct"])
        if len(rs) < 3:
            continue
        last = rs[-1]
        same = lambda r: (r.get("huge_share") == last.get("huge_share")  # noqa: E731
                          and abs(r["speedup_est"] - last["speedup_est"]) <= 1e-9 * max(1.0, abs(last["speedup_est"])))
        i = len(rs) - 1
        while i > 0 and same(rs[i - 1]):
            i -= 1
        # Flat over at least three budgets, and the line gained something
        # (a line flat at 1.000x from 0% is "nothing promoted", said elsewhere).
        if len(rs) - i < 3 or last.get("huge_share", 0) == 0:
            continue
        why = FLAT_WHY.get(pol, FLAT_WHY.get(pol.split(":")[0])) or \
            "the policy promotes at its own pace and never reaches the cap, so a larger budget is never used"
        notes.append(f"{pol} stays at {last['speedup_est']:.3f}x (huge pages {100 * last['huge_share']:.1f}% of the "
                     f"footprint) from {rs[i]['budget_pct']:g}% to {last['budget_pct']:g}%: {why}.")
    # Lines flat at 1.000x at the smallest budgets: below one 2MB region's
    # share of the footprint no policy can promote anything (said once).
    fp = next((r.get("footprint_bytes") for rs in curves.values() for r in rs if r.get("footprint_bytes")), None)
    if fp:
        region = 100 * (2 << 20) / fp
        below = sorted({r["budget_pct"] for rs in curves.values() for r in rs if 0 < r["budget_pct"] < region})
        if below:
            notes.append(f"every line is flat at budgets {', '.join(f'{b:g}%' for b in below)}: one 2MB region is "
                         f"{region:.1f}% of the {fp / 2**20:.1f} MiB footprint, so a smaller budget holds no huge "
                         f"page.")
    return notes


def rich_table(table) -> str:
    """A rich ``Table`` (the terminal's) as an HTML table: same title,
    columns and cells, markup removed."""
    from rich.text import Text

    def plain(cell) -> str:
        return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain

    out = []
    if table.title:
        out.append(f"<h4>{html.escape(plain(table.title))}</h4>")
    cols = table.columns
    out.append("<table><tr>" + "".join(f"<th>{html.escape(plain(c.header))}</th>" for c in cols) + "</tr>")
    for i in range(table.row_count):
        cells = []
        for c in cols:
            v = plain(c._cells[i]) if i < len(c._cells) else ""
            cls = ' class="n"' if c.justify == "right" else ""
            cells.append(f"<td{cls}>{html.escape(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _kv(pairs: List[tuple]) -> str:
    return "<table>" + "".join(f"<tr><th>{html.escape(str(k))}</th><td>{v}</td></tr>" for k, v in pairs) + "</table>"


def _config(data: Dict[str, Any]) -> str:
    t = data.get("trace") or {}
    parts = []
    trace_rows = [("file", html.escape(str(t.get("path", "?")))), ("workload", html.escape(str(t.get("workload", "?")))),
                  ("parameters", f"<code>{html.escape(json.dumps(t.get('params', {})))}</code>"),
                  ("accesses", f"{t.get('accesses', 0):,}"), ("cpus / processes", f"{t.get('cpus')} / {t.get('processes')}")]
    regions = t.get("regions") or []
    if regions:
        trace_rows.append(("regions", "<br>".join(
            f"{html.escape(r['name'])} (pid {r.get('pid', 0)}): {r['base']:#x}, {r['len'] / 2**20:.3g} MiB" for r in regions)))
    parts.append("<h4>Trace header</h4>" + _kv(trace_rows))
    m = data.get("machine")
    if m:
        mrows = [("preset", html.escape(str(m.get("name")))), ("description", html.escape(str(m.get("description", ""))))]
        parts.append("<h4>Machine</h4>" + _kv(mrows) +
                     f"<details><summary>full machine configuration</summary><pre>{html.escape(json.dumps(m, indent=1))}</pre></details>")
    osc = data.get("os")
    if osc:
        orows = [(k, f"<code>{html.escape(json.dumps(v))}</code>") for k, v in osc.items() if k != "costs"]
        if data.get("time_base"):
            orows.append(("time base", f"<code>{html.escape(json.dumps(data['time_base']))}</code>"))
        if data.get("memory_bytes"):
            orows.append(("simulated memory", f"{data['memory_bytes'] / 2**30:.3g} GiB"))
        parts.append("<h4>OS model</h4>" + _kv(orows) +
                     f"<details><summary>OS costs</summary><pre>{html.escape(json.dumps(osc.get('costs'), indent=1))}</pre></details>")
    if data.get("options"):
        parts.append("<h4>Experiment options</h4><pre>" + html.escape(json.dumps(data["options"], indent=1)) + "</pre>")
    return "<h3>Configuration</h3>" + "".join(parts)


def _study_config(data: Dict[str, Any]) -> str:
    """The configuration of a study that makes its own traces: workload and
    parameters, OS options shared by its runs, and each configuration."""
    rows = [("workload", html.escape(str(data.get("workload", "?")))),
            ("parameters", f"<code>{html.escape(json.dumps(data.get('params', {})))}</code>"),
            ("processes", html.escape(str(data.get("processes", 1)))),
            ("OS options", f"<code>{html.escape(json.dumps(data.get('os_options', {})))}</code>"),
            ("machine preset", html.escape(str(data.get("preset", "?")))),
            ("configurations", "<br>".join(f"{html.escape(str(c[0]))}: <code>{html.escape(str(c[1]))}</code>"
                                           + (f" <code>{html.escape(json.dumps(c[2]))}</code>" if c[2] else "")
                                           for c in data.get("configs", [])))]
    return "<h3>Configuration</h3>" + _kv(rows)


def _figures(data: Dict[str, Any]) -> str:
    from . import plots

    out = []
    kind = data.get("kind", "estimate")
    for caption, fig in plots.figures(data):
        b64 = base64.b64encode(plots.to_png(fig)).decode("ascii")
        out.append(f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{b64}">'
                   f"<figcaption>{html.escape(caption)} {_badge(kind)}</figcaption></figure>")
    return "".join(out)


def _subject(data: Dict[str, Any]) -> str:
    """What a section's result is about: the trace's workload, or for a paper
    study (which makes its own traces) its scale and machine."""
    if data.get("hugescope_experiment") == "reproduction":
        return f"{', '.join(data.get('papers') or [])}, {data.get('scale')} scale"
    if data.get("hugescope_experiment") == "validate-suite":
        return f"{data.get('suite') or 'workloads'}: {', '.join(map(str, data.get('workloads') or []))}"
    if data.get("trace"):
        # The trace's file name tells two runs of one workload apart (gups at two sizes).
        workload = str(data["trace"].get("workload", "?"))
        stem = os.path.splitext(os.path.basename(str(data["trace"].get("path") or "")))[0]
        return f"{workload} ({stem})" if stem and stem != workload else workload
    if data.get("scale"):
        what = f"{data['workload']}, " if data.get("workload") else ""
        return f"{what}{data['scale']} scale, {data.get('preset', '?')}"
    return "?"


def _section(i: int, data: Dict[str, Any]) -> str:
    exp = data.get("hugescope_experiment", "?")
    kind = data.get("kind", "estimate")
    t = data.get("trace") or {}
    title = f"{TITLES.get(exp, exp)}: {_subject(data)}"
    body = [f'<h2 id="r{i}">{html.escape(title)} {_badge(kind)}</h2>',
            f'<p class="note">from <code>{html.escape(data.get("_file", ""))}</code></p>']
    if exp == "reproduction":
        # The table has its own columns and no trace or figure.
        from .reproduce import render

        return "".join(body) + render.section(data)
    if exp == "reuse":
        body.append(f'<p class="note">Reuse distance = accesses to other pages between two consecutive accesses to '
                    f'a page, averaged per page ({html.escape(json.dumps((data.get("options") or {}).get("average")))}); '
                    f'threshold {(data.get("options") or {}).get("threshold")}. Exact counts from the trace.</p>')
    if exp == "validate":
        rho = data.get("spearman")
        how = data.get("how") or {}
        body.append(f'<p class="note">Spearman rank correlation of predicted and measured speedups: '
                    f'<b>{"undefined" if rho is None else f"{rho:.3f}"}</b>. Predicted: '
                    f'{html.escape(str(how.get("estimate", "")))}. Measured: '
                    f'{html.escape(str(how.get("measurement", "")))}.</p>')
    if exp == "validate-suite":
        body.append(_suite_summary(data))
    if exp == "ds-tables":
        body.append('<p class="note">Overhead = page-walker cycles / total cycles, from the cost model (estimates). '
                    "f_DS = share of the 4KB run's walks inside the primary region. <i>DS linear</i> is the paper's "
                    "estimate, overhead(4KB) x (1 - f_DS); <i>DS simulated</i> is the run with the segment, where "
                    "the TLBs serve only paged memory. Paper columns: Tables 4 and 5 of the paper (measured on its "
                    "Sandy Bridge machine, at its footprints).</p>")
    body.append(_figures(data))
    if exp in ("curve", "multi"):
        body += [f'<p class="note"><b>Flat line:</b> {html.escape(n)}</p>' for n in flat_notes(data.get("rows", []))]
    body.append("<h3>Table</h3>" + _table(data.get("rows", []), COLUMNS.get(exp), kind))
    notes = {**INGENS_NOTES, **NAVARRO_NOTES}
    if exp in notes:
        body.append(f'<p class="note">{html.escape(notes[exp])}</p>')
    if data.get("checks") is not None and (exp == "ds-tables" or exp in notes):
        body.append("<h3>The paper's claims on this run</h3>" + _table(
            [{**c, "holds": VERDICT[c.get("holds")]} for c in data.get("checks", [])], ["claim", "holds", "detail"],
            kind))
        if data.get("knees"):
            body.append("<h3>GUPS knees</h3>" + _table(data["knees"], ["config", "reach_bytes", "knee_bytes",
                                                                        "largest_bytes", "max_walks_per_1k"], kind))
    if exp == "multi" and data.get("processes"):
        body.append("<h3>Per process</h3>" + _table(data["processes"], ["policy", "budget_pct", "pid", "process",
                                                                         "huge_share", "walk_reduction"], kind))
    if exp == "validate-suite":
        # No single trace: the options and the machine the plans were simulated on.
        body.append("<h3>Configuration</h3><pre>" + html.escape(json.dumps(data.get("options"), indent=1)) + "</pre>"
                    + f"<details><summary>machine (simulated)</summary><pre>"
                    f"{html.escape(json.dumps(data.get('machine'), indent=1))}</pre></details>")
    else:
        body.append(_study_config(data) if exp in INGENS_NOTES else _config(data))
    return "".join(body)


def _suite_summary(data: Dict[str, Any]) -> str:
    """The validation suite's figures: overall and per workload, LOO and
    in-sample, the fitted parameters with units, and how each was obtained."""
    def num(v, pct=False):
        return "-" if v is None else (f"{100 * v:.1f}%" if pct else f"{v:.3f}")

    s = data.get("summary") or {}
    rows = []
    for key, what in (("loo", "leave-one-workload-out"), ("in_sample", "in-sample")):
        st = s.get(key) or {}
        rows.append({"fit": what, "plans": st.get("plans"), "ranked (above the noise floor)": st.get("ranked"),
                     "distinct after ties": st.get("distinct"),
                     "Spearman": num(st.get("spearman")), "median abs error (ranked)":
                     num(st.get("median_abs_error"), True), "median abs error (all plans)":
                     num(st.get("median_abs_error_all"), True)})
    out = ["<h3>Summary</h3>", _table(rows, None, "measurement")]
    out.append("<h3>Per workload</h3>" + _table(data.get("workloads", []), None, "measurement"))
    units = data.get("param_units") or {}
    prow = [{"parameter": k, "in-sample fit": f"{v:.4g}", "unit": units.get(k, "")}
            for k, v in (data.get("params") or {}).items()]
    out.append("<h3>Cost-model parameters (fitted on every workload)</h3>" + _table(prow, None, "estimate"))
    how = data.get("how") or {}
    out.append('<p class="note">' + " ".join(f"<b>{html.escape(k.replace('_', ' '))}:</b> {html.escape(str(v))}."
                                             for k, v in how.items()) + "</p>")
    return "".join(out)


def _claims(results: List[Dict[str, Any]]) -> list:
    """The PCC paper's claims table (the one the demo prints) when the
    results hold the demo's utility curve and fragmentation runs; nothing
    for other runs (their policies or budgets differ)."""
    import pandas as pd

    from .demo_paper import claims_table

    # The curve of the fragmentation run's trace (the demo draws curves of
    # other workloads too, but the claims are made on BFS's pair).
    frags = [d for d in results if d.get("hugescope_experiment") == "frag"]
    if not frags:
        return []
    path = (frags[-1].get("trace") or {}).get("path")
    curves = [d for d in results if d.get("hugescope_experiment") == "curve" and (d.get("trace") or {}).get("path") == path]
    if not curves:
        return []
    try:
        return [claims_table(pd.DataFrame(curves[-1]["rows"]), pd.DataFrame(frags[-1]["rows"]))]
    except (IndexError, KeyError):
        return []  # not the demo's policies and budgets: the claims do not apply


def build(results_dir: str, out: str, title: Optional[str] = None, tables=()) -> str:
    """Write the report of every experiment result in ``results_dir`` to ``out``.
    ``tables``: rich Tables a command printed on the terminal (the demo's MMU,
    OS-model and claims tables), shown first as HTML tables."""
    results = load_dir(results_dir)
    # The paper's order: Fig. 2, 5, 6, 7, 8-9; anything else (measurements
    # from the real-Linux side, ...) after, by file name.
    order = {"reproduction": -1, "reuse": 0, "curve": 1, "sensitivity": 2, "frag": 3, "multi": 4, "ds-tables": 5,
             **{k: 6 + i for i, k in enumerate([*INGENS_NOTES, *NAVARRO_NOTES])}}
    results.sort(key=lambda d: (order.get(d.get("hugescope_experiment"), 99), d.get("_file", "")))
    if not results:
        raise HugescopeError(f"{results_dir}: no experiment results (*.json written by 'hugescope curve', 'frag', ...)")
    title = title or f"hugescope report: {os.path.basename(os.path.abspath(results_dir))}"
    toc = "".join(f'<li><a href="#r{i}">{html.escape(TITLES.get(d.get("hugescope_experiment"), d.get("hugescope_experiment", "?")))}'
                  f': {html.escape(_subject(d))}</a></li>' for i, d in enumerate(results))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">hugescope {html.escape(_core.version())}, {when}; {len(results)} result file(s) from '
        f"<code>{html.escape(os.path.abspath(results_dir))}</code>.</p>",
        "<p>Numbers are labelled by where they come from: "
        f"{_badge('estimate')} numbers come from the simulator (TLB and page-walk model, OS model, and the cycle "
        "cost model for speedups); they are predictions, never timings. "
        f"{_badge('measurement')} numbers are measured: exact statistics of the trace (reuse distances) or runs "
        "on real Linux.</p>",
        f"<ul>{toc}</ul>",
    ]
    tables = list(tables) + _claims(results)
    if tables:
        parts.append('<h2 id="tables">Tables of the run (as printed on the terminal)</h2>')
        parts += [rich_table(t) for t in tables]
    from .cli import working  # the CLI's spinner: drawing every figure takes seconds

    with working(f"report: drawing the figures of {len(results)} result(s)"):
        parts += [_section(i, d) for i, d in enumerate(results)]
    parts.append("</body></html>\n")
    write_atomic(out, "".join(parts))
    return out
