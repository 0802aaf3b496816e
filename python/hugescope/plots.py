"""Figures of the experiments (matplotlib, Agg backend: no display needed).

Each ``plot_*`` function takes the data of one saved experiment (the dict that
``experiments.save`` wrote, or ``{"rows": DataFrame-records, ...}``) and
returns a matplotlib Figure. Speedups are estimates of the cost model and the
titles say so; reuse distances are exact statistics of the trace.
"""

from __future__ import annotations

import io
import math
from typing import Any, Dict, List, Optional, Tuple

from ._core import HugescopeError

import pandas as pd

try:
    import matplotlib

    matplotlib.use("Agg")
    # SVG element ids are random unless salted: a fixed salt keeps figures of
    # the same data byte-identical between runs.
    matplotlib.rcParams["svg.hashsalt"] = "hugescope"
    import matplotlib.pyplot as plt
except ImportError:
    # Plotting is an extra (hugescope[plot]): this module still imports, and
    # whatever would draw calls require_matplotlib first (commands do so
    # through figure_paths before their work), so the message is one line.
    matplotlib = plt = None


def require_matplotlib() -> None:
    """Raise the one-line error saying how to get figures when matplotlib is missing."""
    if plt is None:
        raise HugescopeError("figures need matplotlib, which is not installed: pip install 'hugescope[plot]' "
                             "(or run without plots, e.g. --no-plots)")

CLASS_COLORS = {"tlb_friendly": "#2e9e44", "hub": "#1f5fbf", "low_reuse": "#d62728"}
CLASS_LABELS = {"tlb_friendly": "TLB-friendly (4KB RD < T)", "hub": "HUB (4KB RD >= T, 2MB RD < T)",
                "low_reuse": "low reuse (both >= T)"}


# ---------------------------------------------------------------- colours
#
# One palette for every figure: a policy has the same colour in every figure
# of a run (pcc is always blue, linux always green), and the points of a
# figure (a fragmented Linux run, ...) take colours no line of that figure
# uses, so no two things in one figure share a colour.

#: Qualitative colours (matplotlib's tab10, then tab20's light variants).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5"]
#: The policies of the papers, fixed so that colours do not move when the
#: registry grows; the base and ideal references are black and grey lines.
POLICY_COLOURS = {"pcc": PALETTE[0], "hawkeye": PALETTE[1], "linux": PALETTE[2], "ingens": PALETTE[3],
                  "oracle": PALETTE[4], "random": PALETTE[5], "static": PALETTE[6], "navarro": PALETTE[7],
                  "mthp": PALETTE[8], "base": "#000000", "ideal": "#7f7f7f"}


def policy_colour(label: str) -> str:
    """The colour of a policy: its fixed one, or a variant's ('pcc:...',
    'pcc (artifact reads)'): a light colour chosen from the full label, so two
    variants of one policy differ from each other and from the policy."""
    import zlib

    label = str(label)
    if label in POLICY_COLOURS:
        return POLICY_COLOURS[label]
    spare = PALETTE[9:]
    return spare[zlib.crc32(label.encode()) % len(spare)]


def colours_for(lines, points=0) -> Tuple[Dict[str, str], List[str]]:
    """Colours of one figure: ``lines`` (policy labels) get their policy
    colours, made distinct within the figure (a clash moves to the next free
    palette colour), and ``points`` further elements get palette colours no
    line uses."""
    used, out = set(), {}
    free = lambda: next(c for c in PALETTE + ["#333333"] * 8 if c not in used)  # noqa: E731
    for label in dict.fromkeys(lines):
        c = policy_colour(label)
        if c in used:
            c = free()
        out[label] = c
        used.add(c)
    extra = []
    for _ in range(points):
        c = free()
        extra.append(c)
        used.add(c)
    return out, extra


def _rows(data: Dict[str, Any], key: str = "rows") -> pd.DataFrame:
    v = data.get(key, [])
    return v if isinstance(v, pd.DataFrame) else pd.DataFrame(v)


def _workload(data: Dict[str, Any]) -> str:
    t = data.get("trace") or {}
    w = t.get("workload", "trace")
    p = t.get("params") or {}
    return f"{w} (scale {p['scale']})" if "scale" in p else w


def _kind_note(df: pd.DataFrame) -> str:
    kinds = set(df["kind"]) if "kind" in df else {"estimate"}
    return "measurement" if kinds == {"measurement"} else "estimate"


#: Metadata left out of each format so the same figure gives the same bytes
#: (the creation date would differ on every run).
_NO_DATE = {"png": None, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def render(fig, fmt: str = "png", dpi: int = 110, close: bool = True) -> bytes:
    """The figure as PNG (raster, ``dpi``), SVG or PDF (vector) bytes."""
    require_matplotlib()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata=_NO_DATE[fmt])
    if close:
        plt.close(fig)
    return buf.getvalue()


def to_png(fig, dpi: int = 110) -> bytes:
    return render(fig, "png", dpi)


def _budget_axis(ax, budgets: List[float]) -> None:
    # symlog keeps 0% on the axis while spacing 1, 2, 4, ... 64 evenly, as the
    # paper's categorical axis does.
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xticks(budgets)
    ax.set_xticklabels([f"{b:g}" for b in budgets])
    ax.set_xlabel("huge-page limit (% of footprint)")


def plot_curve(data: Dict[str, Any]):
    """Fig. 5: speedup (estimate) and PTW rate vs % of footprint in huge pages."""
    df = _rows(data)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    curve = df[df["role"] == "curve"]
    budgets = sorted(set(curve["budget_pct"].dropna()))
    refs = df[df["role"] == "reference"]
    points = df[df["role"] == "point"]
    colour, point_colours = colours_for(list(curve["policy"]) + list(refs["policy"]), len(points))
    for pol, g in curve.groupby("policy", sort=False):
        g = g.sort_values("budget_pct")
        a1.plot(g["budget_pct"], g["speedup_est"], marker="o", label=pol, color=colour[pol])
        a2.plot(g["budget_pct"], 100 * g["ptw_rate"], marker="o", label=pol, color=colour[pol])
    styles = {"base": "--", "ideal": ":"}
    for _, r in refs.iterrows():
        c, ls = colour[r["policy"]], styles.get(r["policy"], "-.")
        a1.axhline(r["speedup_est"], color=c, linestyle=ls, label=f"{r['policy']} (no limit)")
        a2.axhline(100 * r["ptw_rate"], color=c, linestyle=ls, label=f"{r['policy']} (no limit)")
    for c, (_, r) in zip(point_colours, points.iterrows()):
        # A fragmented Linux run has no limit: it sits at the share it reached.
        x = 100 * r["huge_share"]
        lab = f"{r['policy']}, {r['frag_pct']:g}% fragmented"
        a1.scatter([x], [r["speedup_est"]], marker="X", s=70, zorder=5, label=lab, color=c)
        a2.scatter([x], [100 * r["ptw_rate"]], marker="X", s=70, zorder=5, label=lab, color=c)
    for ax in (a1, a2):
        _budget_axis(ax, budgets or [0, 1, 100])
        ax.grid(alpha=0.3)
    a1.set_ylabel("speedup over 4KB pages (estimate)")
    a2.set_ylabel("PTW rate (% of accesses that walk)")
    a1.set_title("utility curve: speedup (estimate, cost model)")
    a2.set_title("utility curve: page-walk rate (simulated)")
    a2.legend(fontsize=8, loc="best")
    fig.suptitle(f"{_workload(data)}: huge pages limited to N% of the footprint")
    fig.tight_layout()
    return fig


def plot_frag(data: Dict[str, Any]):
    """Fig. 7: speedup (estimate) of each policy at each fragmentation level."""
    df = _rows(data)
    levels = sorted(set(df["frag_pct"]))
    pols = list(dict.fromkeys(df["policy"]))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(pols) * len(levels) / 2), 4.2))
    width = 0.8 / max(1, len(pols))
    colour, _ = colours_for(pols)
    for i, pol in enumerate(pols):
        ys = [df[(df["policy"] == pol) & (df["frag_pct"] == lv)]["speedup_est"].mean() for lv in levels]
        xs = [j + (i - (len(pols) - 1) / 2) * width for j in range(len(levels))]
        bars = ax.bar(xs, ys, width=width, label=pol, color=colour[pol])
        for b, y in zip(bars, ys):
            if y == y:  # not NaN
                ax.annotate(f"{y:.2f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels([f"{lv:g}% of 2MB blocks fragmented" for lv in levels])
    ax.set_xlabel("fragmentation level")
    ax.set_ylabel("speedup over unfragmented 4KB pages (estimate)")
    ax.set_title(f"{_workload(data)}: fragmentation (estimate, cost model)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _size_axis(ax, sizes, label: str, rotation: float = 0) -> None:
    """A log2 x axis ticked at each of ``sizes`` (a structure's entries)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes))
    ax.set_xticklabels([str(int(s)) for s in sizes], **({"rotation": rotation} if rotation else {}))
    ax.set_xlabel(label)
    ax.grid(alpha=0.3)


def plot_sensitivity(data: Dict[str, Any]):
    """Fig. 6: speedup (estimate) and PTW rate vs PCC entries."""
    df = _rows(data)
    cur = df[df["role"] == "curve"].sort_values("size")
    opts = data.get("options", {})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    refs = df[df["role"] == "reference"]
    pol = opts.get("policy", "pcc")
    colour, _ = colours_for([pol] + list(refs["policy"]))
    a1.plot(cur["size"], cur["speedup_est"], marker="o", label=pol, color=colour[pol])
    a2.plot(cur["size"], 100 * cur["ptw_rate"], marker="o", label=pol, color=colour[pol])
    for _, r in refs.iterrows():
        ls = "--" if r["policy"] == "base" else ":"
        a1.axhline(r["speedup_est"], color=colour[r["policy"]], linestyle=ls, label=r["policy"])
        a2.axhline(100 * r["ptw_rate"], color=colour[r["policy"]], linestyle=ls, label=r["policy"])
    for ax in (a1, a2):
        _size_axis(ax, cur["size"], f"PCC entries ({opts.get('policy', 'pcc')} parameter '{opts.get('param', 'entries')}')")
    a1.set_ylabel("speedup over 4KB pages (estimate)")
    a2.set_ylabel("PTW rate (% of accesses that walk)")
    a1.set_title("PCC size sensitivity: speedup (estimate, cost model)")
    a2.set_title("PCC size sensitivity: page-walk rate (simulated)")
    a2.legend(fontsize=8)
    fig.suptitle(f"{_workload(data)}: huge pages limited to {opts.get('budget_pct', 32):g}% of the footprint")
    fig.tight_layout()
    return fig


def plot_tlb_sizes(data: Dict[str, Any]):
    """Walks per 1k accesses and speedup over the configured size (estimate) vs L2 TLB entries."""
    df = _rows(data).sort_values("entries")
    opts = data.get("options", {})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    a1.plot(df["entries"], df["walks_per_1k_accesses"], marker="o", color="tab:blue")
    a2.plot(df["entries"], df["speedup_vs_configured"], marker="o", color="tab:green")
    conf = df[df["configured"]]
    for ax, col in ((a1, "walks_per_1k_accesses"), (a2, "speedup_vs_configured")):
        ax.plot(conf["entries"], conf[col], marker="*", markersize=14, linestyle="none", color="tab:red",
                label=f"configured ({int(opts.get('configured_entries', 0))} entries)")
        _size_axis(ax, df["entries"], f"{opts.get('structure', 'L2')} entries ({opts.get('sets', '?')} sets; more ways)",
                   rotation=45)
    a1.set_ylabel("page walks per 1000 accesses (simulated)")
    a2.set_ylabel("speedup over the configured size (estimate)")
    a1.set_title("L2 TLB size: page walks")
    a2.set_title("L2 TLB size: speedup (estimate, cost model)")
    a1.legend(fontsize=8)
    fig.suptitle(f"{_workload(data)}: L2 TLB size sensitivity, {opts.get('pages', '4k')} pages, one pass")
    fig.tight_layout()
    return fig


def plot_reuse(data: Dict[str, Any]):
    """Fig. 2: 2MB vs 4KB page reuse distance, one point per (sampled) 4KB page."""
    pts = _rows(data, "points")
    opts = data.get("options", {})
    thr = float(opts.get("threshold", 1024))
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    never = 0
    if len(pts):
        pts = pts.copy()
        never = int(pts["rd_4k"].isna().sum())
        # A page touched once has no reuse: drawn at the right edge, beyond every
        # measured distance. Distances of 0 are drawn at 1 on the log axes.
        finite = pd.concat([pts["rd_4k"], pts["rd_2m"]]).dropna()
        edge = max(float(finite.max()) if len(finite) else thr, thr) * 4
        pts["x"] = pts["rd_4k"].fillna(edge).clip(lower=1)
        pts["y"] = pts["rd_2m"].fillna(edge).clip(lower=1)
        for cls in ("tlb_friendly", "hub", "low_reuse"):
            g = pts[pts["class"] == cls]
            if len(g):
                ax.scatter(g["x"], g["y"], s=6, alpha=0.6, color=CLASS_COLORS[cls],
                           label=f"{CLASS_LABELS[cls]}: {len(g)}")
        if never:
            ax.axvline(edge, color="black", linewidth=0.5, alpha=0.4)
            ax.annotate("touched once\n(no reuse)", (edge, 1), fontsize=7, ha="right", va="bottom")
    ax.axvline(thr, color="black", linestyle="--", linewidth=1)
    ax.axhline(thr, color="black", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("4KB page reuse distance (accesses to other pages)")
    ax.set_ylabel("2MB page reuse distance (accesses to other pages)")
    shown = data.get("points_kept", len(pts))
    total = data.get("points_total", shown)
    ax.set_title(f"{_workload(data)}: 2MB vs 4KB page reuse distance (measured on the trace)\n"
                 f"{shown:,} of {total:,} pages shown; T = {thr:g}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.2)
    fig.tight_layout()
    return fig


def plot_reuse_regions(data: Dict[str, Any]):
    """Share of pages in each class per region (stacked bars)."""
    df = _rows(data)
    df = df[df["region"] != "(all)"]
    regions = list(dict.fromkeys(df["region"]))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(regions)), 4))
    bottom = [0.0] * len(regions)
    for cls in ("tlb_friendly", "hub", "low_reuse"):
        ys = [float(df[(df["region"] == r) & (df["class"] == cls)]["page_share"].sum()) * 100 for r in regions]
        ax.bar(regions, ys, bottom=bottom, color=CLASS_COLORS[cls], label=CLASS_LABELS[cls])
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlabel("region")
    ax.set_ylabel("% of the region's touched 4KB pages")
    ax.set_title(f"{_workload(data)}: reuse classes per region (measured on the trace)")
    ax.legend(fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    return fig


def plot_multi(data: Dict[str, Any]):
    """Figs. 8-9: combined speedup (estimate) vs limit, per promotion policy."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    cur = df[df["role"] == "curve"]
    refs = df[df["role"] == "reference"]
    colour, _ = colours_for(list(cur["policy"]) + list(refs["policy"]))
    for pol, g in cur.groupby("policy", sort=False):
        g = g.sort_values("budget_pct")
        ax.plot(g["budget_pct"], g["speedup_est"], marker="o", label=pol, color=colour[pol])
    for _, r in refs.iterrows():
        ax.axhline(r["speedup_est"], color=colour[r["policy"]], linestyle=":", label=f"{r['policy']} (no limit)")
    _budget_axis(ax, sorted(set(cur["budget_pct"].dropna())) or [0, 1, 100])
    ax.set_ylabel("speedup over 4KB pages (estimate)")
    ax.set_title(f"{_workload(data)}: promotion policies (estimate, cost model)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_timeline(data: Dict[str, Any], budget_pct: Optional[float] = None):
    """Huge-page memory per process over virtual time, one panel per policy,
    at one limit (default: the median limit of the sweep)."""
    tl = _rows(data, "timeline")
    if not len(tl):
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no timeline samples", ha="center")
        return fig
    cur = tl[tl["role"] == "curve"]
    budgets = sorted(set(cur["budget_pct"].dropna()))
    if budget_pct is None and budgets:
        budget_pct = budgets[len(budgets) // 2]
    sel = cur[cur["budget_pct"] == budget_pct] if budgets else tl
    pols = list(dict.fromkeys(sel["policy"]))
    names = {}
    for p in (data.get("processes") or []):
        names[p["pid"]] = p["process"]
    fig, axes = plt.subplots(1, max(1, len(pols)), figsize=(5.5 * max(1, len(pols)), 3.8), squeeze=False, sharey=True)
    for ax, pol in zip(axes[0], pols):
        g = sel[sel["policy"] == pol]
        for pid, gp in g.groupby("pid"):
            ax.plot(gp["time_s"], gp["huge_bytes"] / 2**20, label=f"pid {pid} {names.get(pid, '')}".strip())
        ax.set_title(f"{pol} (estimate)", fontsize=10)
        ax.set_xlabel("virtual time (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("huge-page memory (MiB)")
    fig.suptitle(f"{_workload(data)}: huge pages per process over time, limit {budget_pct:g}% of footprint")
    fig.tight_layout()
    return fig


def _diagonal(values: List[float], ax, min_span: float, label: str) -> List[float]:
    """The y = x line of a predicted-vs-measured scatter over ``values``
    padded by 5% of their span (at least ``min_span``); returns its ends."""
    a, b = min(values), max(values)
    pad = 0.05 * max(b - a, min_span)
    line = [a - pad, b + pad]
    ax.plot(line, line, color="gray", linestyle="--", linewidth=1, label=label)
    return line


def plot_validate(data: Dict[str, Any]):
    """Predicted (estimate) vs measured speedup of each policy's top-k plan,
    with the measured min..max as error bars and the Spearman correlation."""
    df = _rows(data)
    pred = df[df["quantity"] == "predicted"].set_index(["policy", "k"])
    meas = df[df["quantity"] == "measured"].set_index(["policy", "k"])
    fig, ax = plt.subplots(figsize=(6.8, 5.2))
    lo, hi = [], []
    colour, _ = colours_for(list(df["policy"]))
    for pol in dict.fromkeys(df["policy"]):
        keys = [i for i in pred.index if i[0] == pol and i in meas.index]
        xs = [float(pred.loc[i, "speedup"]) for i in keys]
        ys = [float(meas.loc[i, "speedup"]) for i in keys]
        yerr = [[y - float(meas.loc[i, "speedup_min"]) for i, y in zip(keys, ys)],
                [float(meas.loc[i, "speedup_max"]) - y for i, y in zip(keys, ys)]]
        ax.errorbar(xs, ys, yerr=yerr, fmt="o", capsize=3, label=pol, color=colour[pol])
        for i, x, y in zip(keys, xs, ys):
            ax.annotate(f"k={i[1]}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
        lo += xs + ys
        hi += xs + ys
    if lo:
        _diagonal(lo + hi, ax, 0.01, "measured = predicted")
    rho = data.get("spearman")
    ax.set_xlabel("predicted speedup over 4KB pages (estimate, cost model)")
    ax.set_ylabel("measured speedup over 4KB pages (median of runs; bars: min..max)")
    ax.set_title(f"{_workload(data)}: top-k 2MB regions per policy, predicted vs measured\n"
                 f"Spearman rank correlation {'undefined' if rho is None else f'{rho:.3f}'}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_model(record: Dict[str, Any]):
    """A per-program model (``mosaic``): held-out predicted time against
    measured time per layout, with the y = x line and the noise floor's band."""
    require_matplotlib()
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    xs = [p["t"] for p in record["points"]]
    ys = [p["predicted_s"] for p in record["points"]]
    ax.scatter(xs, ys, zorder=3)
    for p in record["points"]:
        ax.annotate(p["plan"], (p["t"], p["predicted_s"]), textcoords="offset points", xytext=(4, 3), fontsize=7)
    line = _diagonal(xs + ys, ax, 1e-3, "predicted = measured")
    f = record["noise_floor"]
    ax.fill_between(line, [v * math.exp(-f) for v in line], [v * math.exp(f) for v in line], color="gray",
                    alpha=0.15, label=f"noise floor ({100 * f:.1f}%)")
    ho = record["held_out"]
    ax.set_xlabel("measured time (s, median over interleaved rounds)")
    ax.set_ylabel("predicted time (s, estimate, model fitted without the layout)")
    ax.set_title(f"{record['workload']}: {record['layouts']} layouts, held-out max error "
                 f"{100 * ho['max_abs_error']:.1f}%, median {100 * ho['median_abs_error']:.1f}%", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


#: Tick marks of the validation scatter's speedup axes.
SPEEDUP_TICKS = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]


def plot_validate_suite(data: Dict[str, Any]):
    """Predicted (estimate) vs measured speedup of every plan of a validation
    suite, leave-one-workload-out and in-sample side by side: log axes, one
    colour per workload, the measured min..max as bars, plans inside the noise
    floor (ties with base, not ranked) as hollow marks, and the y = x line."""
    df = _rows(data)
    meas = df[(df["quantity"] == "measured") & (df["plan"] != "base")].set_index(["workload", "plan"])
    workloads = list(dict.fromkeys(df["workload"]))
    colour = {w: PALETTE[i % len(PALETTE)] for i, w in enumerate(workloads)}
    summary = data.get("summary") or {}
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.4), squeeze=False)
    for ax, (quantity, what, key) in zip(axes[0], (("predicted_loo", "leave-one-workload-out", "loo"),
                                                   ("predicted_in", "in-sample", "in_sample"))):
        pred = df[(df["quantity"] == quantity) & (df["plan"] != "base")].set_index(["workload", "plan"])
        vals = []
        for w in workloads:
            keys = [i for i in pred.index if i[0] == w and i in meas.index]
            for ranked in (True, False):
                ks = [i for i in keys if bool(meas.loc[i, "ranked"]) == ranked]
                if not ks:
                    continue
                xs = [float(pred.loc[i, "speedup"]) for i in ks]
                ys = [float(meas.loc[i, "speedup"]) for i in ks]
                yerr = [[max(0.0, y - float(meas.loc[i, "speedup_min"])) for i, y in zip(ks, ys)],
                        [max(0.0, float(meas.loc[i, "speedup_max"]) - y) for i, y in zip(ks, ys)]]
                ax.errorbar(xs, ys, yerr=yerr, fmt="o", capsize=2, markersize=5, color=colour[w], elinewidth=0.8,
                            markerfacecolor=colour[w] if ranked else "none",
                            label=w if ranked or not any(bool(meas.loc[i, "ranked"]) for i in keys) else None)
                # The limits hold the bars too, so no measured spread is clipped.
                vals += xs + ys + [y - lo for y, lo in zip(ys, yerr[0])] + [y + hi for y, hi in zip(ys, yerr[1])]
        if vals:
            a, b = min(vals) / 1.05, max(vals) * 1.05
            ax.plot([a, b], [a, b], color="gray", linestyle="--", linewidth=1, label="measured = predicted")
            ax.set_xlim(a, b)
            ax.set_ylim(a, b)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            # Speedups as "1.5x" at fixed steps, not powers of ten: a log axis
            # spanning less than a decade would otherwise label only some.
            axis.set_major_locator(matplotlib.ticker.FixedLocator(SPEEDUP_TICKS))
            axis.set_minor_locator(matplotlib.ticker.NullLocator())
            axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.3g}x"))
        ax.tick_params(labelsize=7)
        st = summary.get(key) or {}
        rho, mae = st.get("spearman"), st.get("median_abs_error")
        ax.set_title(f"{what}: Spearman {'-' if rho is None else f'{rho:.3f}'}, median abs error "
                     f"{'-' if mae is None else f'{100 * mae:.1f}%'} over {st.get('ranked', 0)} ranked plans",
                     fontsize=9)
        ax.set_xlabel("predicted speedup over 4KB pages (estimate, cost model)")
        ax.set_ylabel("measured speedup (median of rounds; bars: min..max)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Validation suite: predicted vs measured speedup per plan; hollow = within the noise floor (tie "
                 "with base, not ranked)", fontsize=10)
    fig.tight_layout()
    return fig


DS_COLOURS = {"4KB": "#4c72b0", "2MB": "#dd8452", "1GB": "#55a868", "DS": "#c44e52", "DS+2MB": "#8172b3"}


def plot_ds_tables(data: Dict[str, Any]):
    """Direct-segments Table 4 as bars: % of cycles in page walks per workload
    and configuration (estimates), the paper's 4KB/2MB/1GB figures as marks."""
    rows = data.get("rows", [])
    configs = [c for c in DS_COLOURS if any(f"{c} %" in r for r in rows)]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(1, len(configs))
    for j, c in enumerate(configs):
        xs = [i + (j - (len(configs) - 1) / 2) * width for i in range(len(rows))]
        ys = [max(r.get(f"{c} %") or 0.0, 1e-4) for r in rows]
        ax.bar(xs, ys, width, label=f"{c} (simulated)", color=DS_COLOURS[c])
        if c in ("4KB", "2MB", "1GB"):
            paper = [r.get(f"paper {c} %") for r in rows]
            ax.scatter([x for x, p in zip(xs, paper) if p], [p for p in paper if p], marker="_", s=120,
                       color="black", zorder=3, label="paper (Table 4)" if c == "4KB" else None)
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 100)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["workload"] for r in rows])
    ax.set_ylabel("% of cycles in page walks (estimate)")
    ax.set_title(f"Direct segments, Table 4 ({data.get('preset', '?')}, {data.get('scale', '?')} scale)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def plot_ds_gups(data: Dict[str, Any]):
    """GUPS overhead vs table size per configuration (the paper's Figure 5),
    with each page size's TLB reach marked: its knee should sit near it."""
    df = pd.DataFrame(data.get("gups", []))
    fig, ax = plt.subplots(figsize=(7, 4))
    if df.empty:
        return fig
    for c, g in df.groupby("config", sort=False):
        g = g.sort_values("footprint_bytes")
        ax.plot(g["footprint_bytes"], 100 * g["overhead"], marker="o", label=c, color=DS_COLOURS.get(c))
    for k in data.get("knees", []):
        if k.get("reach_bytes"):
            ax.axvline(k["reach_bytes"], ls=":", color=DS_COLOURS.get(k["config"]), alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GUPS table size (bytes; dotted: TLB reach per page size)")
    ax.set_ylabel("% of cycles in page walks (estimate)")
    ax.set_title("GUPS scaling (direct segments paper, Fig. 5)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _bars(ax, labels, values, fmt="{:.2f}", colour=None):
    """One labelled bar per configuration (missing values drawn as 0, labelled '-')."""
    ys = [0.0 if v is None or v != v else v for v in values]
    bars = ax.bar(range(len(labels)), ys, color=colour)
    for b, v in zip(bars, values):
        ax.annotate("-" if v is None or v != v else fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8, rotation=15, ha="right")
    ax.grid(axis="y", alpha=0.3)
    return bars


def _huge_over_time(ax, tl: pd.DataFrame, configs, by_pid: bool = False) -> None:
    """Huge-page memory (MiB) over virtual time: one line per configuration,
    or per process of one configuration."""
    for key, g in (tl.groupby("pid") if by_pid else ((c, tl[tl["config"] == c]) for c in configs)):
        if len(g):
            g = g.groupby("time_s", as_index=False)["huge_bytes"].sum() if not by_pid else g
            ax.plot(g["time_s"], g["huge_bytes"] / 2**20, label=f"pid {key}" if by_pid else str(key))
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("huge-page memory (MiB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _ingens_title(data: Dict[str, Any], what: str) -> str:
    return f"Ingens (OSDI'16) {what}: {data.get('workload', '?')}, {data.get('scale', '?')} scale (estimates)"


def plot_ingens_bloat(data: Dict[str, Any]):
    """Tables 5/10: RSS per configuration (bars, bloat over base pages on
    top) and the estimated throughput beside it."""
    df = _rows(data)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    labels = list(df["config"])
    _bars(a1, labels, list(df["rss_bytes"] / 2**20), "{:.0f}")
    for i, b in enumerate(df["bloat"]):
        if b == b and b is not None:
            a1.annotate(f"{b:.2f}x", (i, 0), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8,
                        color="white")
    a1.set_ylabel("RSS at the end (MiB)")
    a1.set_title("memory: RSS (bloat = RSS / linux-nohuge's)")
    _bars(a2, labels, list(df["speedup_est"]), "{:.3f}x", colour="#55a868")
    a2.set_ylabel("throughput over base pages (estimate)")
    a2.set_title("throughput (cost model)")
    fig.suptitle(_ingens_title(data, "bloat, Tables 5/10"))
    fig.tight_layout()
    return fig


def plot_ingens_async(data: Dict[str, Any]):
    """Table 4: huge memory over time under synchronous and asynchronous-only
    promotion, and the estimated run time of each."""
    df = _rows(data)
    tl = _rows(data, "timeline")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    if len(tl):
        _huge_over_time(a1, tl, list(df["config"]))
    a1.set_title("huge-page memory reached")
    _bars(a2, list(df["config"]), list(df.get("run_time_est_s", df["virtual_seconds"])), "{:.1f} s")
    a2.set_ylabel("run time (estimate, s)")
    a2.set_title("run time (cost model)")
    fig.suptitle(_ingens_title(data, "synchronous vs asynchronous-only promotion, Table 4"))
    fig.tight_layout()
    return fig


def plot_ingens_fault_latency(data: Dict[str, Any]):
    """§3.1: mean fault latency per configuration (log scale), the paper's
    figures as marks."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(7, 4))
    _bars(ax, list(df["config"]), list(df["mean_fault_us"]), "{:.1f} us")
    if "paper_latency_us" in df:
        ax.scatter(range(len(df)), df["paper_latency_us"], marker="_", s=300, color="black", zorder=3,
                   label="paper (§3.1)")
        ax.legend(fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("mean page-fault latency (us, estimate)")
    ax.set_title(_ingens_title(data, "fault latency, §3.1"), fontsize=10)
    fig.tight_layout()
    return fig


def plot_ingens_fairness(data: Dict[str, Any]):
    """Fig. 5: huge memory per process over time, one panel per policy, each
    process's finish time marked."""
    df = _rows(data)
    tl = _rows(data, "timeline")
    configs = list(dict.fromkeys(df["config"])) if len(df) else []
    fig, axes = plt.subplots(1, max(1, len(configs)), figsize=(5.5 * max(1, len(configs)), 4), squeeze=False,
                             sharey=True)
    for ax, c in zip(axes[0], configs):
        if len(tl):
            _huge_over_time(ax, tl[tl["config"] == c], [c], by_pid=True)
        for _, r in df[df["config"] == c].iterrows():
            if r.get("finish_seconds") == r.get("finish_seconds") and r.get("finish_seconds") is not None:
                ax.axvline(r["finish_seconds"], ls=":", color="gray")
        ax.set_title(f"{c}: huge memory per process (dotted: finish times)", fontsize=10)
    fig.suptitle(_ingens_title(data, "fairness, Fig. 5"))
    fig.tight_layout()
    return fig


def plot_ingens_fragmented(data: Dict[str, Any]):
    """Table 9: estimated throughput of each configuration on fragmented and
    unfragmented memory."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['config']}\n({r['memory']})" for _, r in df.iterrows()]
    colours = ["#c44e52" if m == "FMFI 0.9" else "#4c72b0" for m in df["memory"]]
    _bars(ax, labels, list(df["speedup_est"]), "{:.3f}x", colour=colours)
    # Two-line labels side by side: upright, or neighbours overlap.
    ax.set_xticklabels(labels, fontsize=7, rotation=0, ha="center")
    ax.set_ylabel("throughput over base pages (estimate)")
    ax.set_title(_ingens_title(data, "fragmented memory, Table 9"), fontsize=10)
    fig.tight_layout()
    return fig


#: The figure of each Ingens study (captions name the paper's table).
INGENS_FIGURES = {
    "ingens-bloat": ("Ingens bloat: RSS and throughput (OSDI'16 Tables 5/10)", plot_ingens_bloat),
    "ingens-async": ("Ingens: synchronous vs asynchronous-only promotion (OSDI'16 Table 4)", plot_ingens_async),
    "ingens-fault-latency": ("Ingens: page-fault latency (OSDI'16 §3.1)", plot_ingens_fault_latency),
    "ingens-fairness": ("Ingens: huge memory per process and finish times (OSDI'16 Fig. 5)", plot_ingens_fairness),
    "ingens-fragmented": ("Ingens: throughput on fragmented memory (OSDI'16 Table 9)", plot_ingens_fragmented),
}


def _navarro_title(data: Dict[str, Any], what: str) -> str:
    return f"Navarro (OSDI'02) {what}: {data.get('preset', '?')}, {data.get('scale', '?')} scale (estimates)"


def _grouped(ax, df: pd.DataFrame, value: str, fmt: str = "{:.2f}", log: bool = False) -> None:
    """One group of bars per workload, one bar per configuration (colours
    follow the configuration, the same in every group)."""
    workloads = list(dict.fromkeys(df["workload"]))
    configs = list(dict.fromkeys(df["config"]))
    width = 0.8 / max(1, len(configs))
    for j, c in enumerate(configs):
        ys = []
        for w in workloads:
            v = df[(df["workload"] == w) & (df["config"] == c)][value]
            ys.append(float(v.iloc[0]) if len(v) and v.iloc[0] == v.iloc[0] and v.iloc[0] is not None else 0.0)
        xs = [i + (j - (len(configs) - 1) / 2) * width for i in range(len(workloads))]
        ax.bar(xs, ys, width, label=c, color=PALETTE[j % len(PALETTE)])
        if len(configs) <= 4:
            for x, y in zip(xs, ys):
                ax.annotate(fmt.format(y), (x, y), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)


def plot_navarro_bars(what: str, value: str, ylabel: str, fmt: str = "{:.2f}x", log: bool = False):
    """A Navarro study as grouped bars of ``value`` per workload and configuration."""
    def plot(data: Dict[str, Any]):
        df = _rows(data)
        fig, ax = plt.subplots(figsize=(max(7, 1.6 * df["workload"].nunique()), 4.2))
        _grouped(ax, df, value, fmt, log)
        ax.set_ylabel(ylabel)
        ax.set_title(_navarro_title(data, what), fontsize=10)
        fig.tight_layout()
        return fig
    return plot


def plot_navarro_sustained(data: Dict[str, Any]):
    """§6.5: contiguity of memory over time under each daemon (Fig. 5's
    metric), and the superpage memory each FFTW run obtained."""
    df = _rows(data)
    tl = _rows(data, "timeline")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for j, c in enumerate(dict.fromkeys(df["config"]) if len(df) else []):
        g = tl[tl["config"] == c] if len(tl) else tl
        if len(g):
            a1.plot(g["time_s"], 100 * g["contiguity"].astype(float), label=c, color=PALETTE[j % len(PALETTE)])
        runs = df[df["config"] == c]
        xs = [r + (j - 0.5) * 0.4 for r in runs["run"]]
        a2.bar(xs, runs["superpage_bytes_peak"] / 2**20, 0.4, label=c, color=PALETTE[j % len(PALETTE)])
    a1.set_xlabel("virtual time (s)")
    a1.set_ylabel("contiguity (% of the all-free score)")
    a1.set_title("contiguity over time (Fig. 5's metric)", fontsize=10)
    a1.grid(alpha=0.3)
    a1.legend(fontsize=8)
    a2.set_xlabel("FFTW run")
    a2.set_ylabel("superpage memory at its peak (MiB)")
    a2.set_title("superpages obtained per run", fontsize=10)
    a2.grid(axis="y", alpha=0.3)
    a2.legend(fontsize=8)
    fig.suptitle(_navarro_title(data, "sustained benefit, §6.5"))
    fig.tight_layout()
    return fig


#: The figure of each Navarro study (captions name the paper's table).
NAVARRO_FIGURES = {
    "navarro-best-case": ("Navarro: best case, speedup per workload (OSDI'02 Table 1)",
                          plot_navarro_bars("best case, Table 1", "speedup_est", "speedup over base pages (estimate)")),
    "navarro-sizes": ("Navarro: one superpage size vs all sizes (OSDI'02 Tables 2/3)",
                      plot_navarro_bars("one size vs all, Tables 2/3", "speedup_est",
                                        "speedup over base pages (estimate)")),
    "navarro-preemption": ("Navarro: preemption with only 4MB available (OSDI'02 §6.6)",
                           plot_navarro_bars("preemption, §6.6", "preemptions", "reservations preempted", "{:,.0f}")),
    "navarro-writeback": ("Navarro: bytes written back with and without demote-on-write (OSDI'02 §6.7)",
                          plot_navarro_bars("dirty superpages, §6.7", "writeback_bytes", "bytes written back (log)",
                                            "{:,.0f}", log=True)),
    "navarro-sustained": ("Navarro: contiguity and superpages over repeated runs (OSDI'02 §6.5, Fig. 5)",
                          plot_navarro_sustained),
    "navarro-mthp": ("Multi-size THP on arm64: DTLB misses with and without contiguous-PTE coalescing",
                     plot_navarro_bars("mTHP today", "dtlb_misses", "DTLB misses (log)", "{:,.0f}", log=True)),
}


def plot_virt_nested(data: Dict[str, Any]):
    """Ingens Table 3's four host/guest combinations per workload: page-walk
    cycles (estimate, log scale) and the speedup over hB/gB (estimate)."""
    df = _rows(data)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(10, 3.2 * df["workload"].nunique()), 4.2))
    _grouped(a1, df, "walk_cycles_est", "{:.2g}", log=True)
    a1.set_ylabel("page-walk cycles (estimate, log)")
    a1.set_title("nested page walks", fontsize=10)
    _grouped(a2, df, "speedup_est", "{:.2f}x")
    a2.set_ylabel("speedup over hB/gB (estimate)")
    a2.set_title("whole run", fontsize=10)
    fig.suptitle(f"Virtualization (Ingens Table 3 shape): {data.get('preset', '?')}, {data.get('scale', '?')} scale "
                 "(estimates; hX/gY = host X, guest Y)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_fhpm_sharing(data: Dict[str, Any]):
    """FHPM Table 2's shape: memory saved per sharing policy, beside each
    VM's estimated performance and huge-page ratio against no sharing."""
    df = _rows(data)
    df = df[df["config"] != "no sharing"]
    labels = list(df["config"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    _bars(a1, labels, list(df["saved_pct"]), "{:.1f}%", colour=PALETTE[0])
    a1.set_ylabel("memory saved, % of memory in use without sharing")
    width = 0.2
    for j, (col, what) in enumerate((("perf_a", "perf VM a"), ("perf_b", "perf VM b"),
                                     ("huge_a", "huge ratio VM a"), ("huge_b", "huge ratio VM b"))):
        ys = [0.0 if v is None or v != v else float(v) for v in df[col]]
        a2.bar([i + (j - 1.5) * width for i in range(len(labels))], ys, width, label=what, color=PALETTE[(j + 1) % len(PALETTE)])
    a2.set_xticks(range(len(labels)))
    a2.set_xticklabels(labels, fontsize=8, rotation=15, ha="right")
    a2.set_ylim(0, 1.15)
    a2.set_ylabel("vs no sharing (estimate) / share of memory huge")
    a2.grid(axis="y", alpha=0.3)
    a2.legend(fontsize=7, ncol=2)
    fig.suptitle(f"FHPM Table 2 shape, sharing microbenchmark: {data.get('preset', '?')}, "
                 f"{data.get('scale', '?')} scale (estimates)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_fhpm_tmm(data: Dict[str, Any]):
    """FHPM Fig 2: estimated performance normalized to all-2MB-all-fast
    against the unbalanced share u, one line per configuration."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for j, c in enumerate(c for c in dict.fromkeys(df["config"]) if c != "all 2MB, all fast"):
        g = df[df["config"] == c].sort_values("u")
        ax.plot(g["u"], g["perf_norm"].astype(float), marker="o", label=c, color=PALETTE[j % len(PALETTE)])
    ax.axhline(1.0, color="#7f7f7f", lw=1, ls="--", label="all 2MB, all fast")
    ax.set_xlabel("share of hot data in unbalanced 2MB pages (u)")
    ax.set_ylabel("performance vs all-2MB all-fast (estimate)")
    ax.set_ylim(0, 1.1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"FHPM Fig 2 (TMM): {data.get('preset', '?')}, {data.get('scale', '?')} scale (estimates)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_virt_ds(data: Dict[str, Any]):
    """Direct segments under virtualization (ISCA'13 §3.3, an extension the
    paper does not evaluate): references per walk and page-walk cycles
    (estimate) per workload for none / guest / VMM / both segments. Linear
    axes: both segments may walk no reference at all."""
    df = _rows(data)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(10, 3.2 * df["workload"].nunique()), 4.2))
    _grouped(a1, df, "refs_per_walk", "{:.1f}")
    a1.set_ylabel("references per walk")
    a1.set_title("nested walk length", fontsize=10)
    _grouped(a2, df, "walk_cycles_est", "{:.2g}")
    a2.set_ylabel("page-walk cycles (estimate)")
    a2.set_title("page walks of the run", fontsize=10)
    fig.suptitle(f"Direct segments in a VM (ISCA'13 §3.3, extension): {data.get('preset', '?')}, "
                 f"{data.get('scale', '?')} scale, host and guest base pages (estimates)", fontsize=10)
    fig.tight_layout()
    return fig


#: The figure of each virtualization study.
VIRT_FIGURES = {
    "virt-nested": ("Huge pages in host and guest: nested walks (Ingens OSDI'16 Table 3 shape)", plot_virt_nested),
    "virt-ds-virt": ("Direct segments under virtualization: guest, VMM, both (ISCA'13 §3.3, extension)",
                     plot_virt_ds),
}


def _fhpm_title(data: Dict[str, Any], what: str) -> str:
    return f"FHPM {what}: {data.get('preset', '?')}, {data.get('scale', '?')} scale (estimates)"


def plot_fhpm_monitoring(data: Dict[str, Any]):
    """Table 4: MB of memory per normalized-frequency bin, one group of bars
    per bin, one bar per monitor (log scale: the bins span decades)."""
    df = _rows(data)
    bins = [c[3:] for c in df.columns if c.startswith("mb_")] if len(df) else []
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(1, len(df))
    for j, rec in enumerate(df.to_dict("records")):
        xs = [i + (j - (len(df) - 1) / 2) * width for i in range(len(bins))]
        ax.bar(xs, [max(float(rec[f"mb_{b}"]), 1e-3) for b in bins], width, label=rec["monitor"],
               color=PALETTE[j % len(PALETTE)])
    ax.set_xticks(range(len(bins)))
    ax.set_xticklabels(bins)
    ax.set_xlabel("normalized access frequency")
    ax.set_ylabel("memory (MB, log)")
    ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_fhpm_title(data, "monitoring accuracy, Table 4"), fontsize=10)
    fig.tight_layout()
    return fig


def plot_fhpm_hp_policy(data: Dict[str, Any]):
    """Fig 8's microbenchmark: the share of huge pages left per policy."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    labels = list(df["config"]) if len(df) else []
    ys = [100 * float(v) for v in df["huge_share"]] if len(df) else []
    ax.bar(range(len(labels)), ys, color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))])
    for i, y in enumerate(ys):
        ax.annotate(f"{y:.0f}%", (i, y), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8, rotation=20)
    ax.set_ylabel("huge pages left (% of the memory)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(_fhpm_title(data, "10 regions per huge page, Fig 8"), fontsize=10)
    fig.tight_layout()
    return fig


def plot_fhpm_split_collapse(data: Dict[str, Any]):
    """Table 6: VM exits after EPT zaps per working-set size, Linux's
    split/collapse against the VM-friendly one (log scale)."""
    df = _rows(data)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    sizes = sorted(set(df["wss_mib"])) if len(df) else []
    for j, c in enumerate(dict.fromkeys(df["config"]) if len(df) else []):
        g = df[df["config"] == c]
        ys = [max(float(g[g["wss_mib"] == w]["vm_exits_after_zap"].iloc[0] or 0), 0.5) for w in sizes]
        xs = [i + (j - 0.5) * 0.4 for i in range(len(sizes))]
        ax.bar(xs, ys, 0.4, label=c, color=PALETTE[j % len(PALETTE)])
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:,.0f}", (x, y), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{w} MiB" for w in sizes])
    ax.set_xlabel("working set")
    ax.set_ylabel("VM exits after EPT zaps (log)")
    ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_fhpm_title(data, "split + collapse of every page, Table 6"), fontsize=10)
    fig.tight_layout()
    return fig


#: The figure of each FHPM study (sharing: fhpm_share.py; tiered memory: fhpm_tmm.py).
FHPM_FIGURES = {
    "fhpm-split-collapse": ("FHPM: VM exits of Linux's and the VM-friendly split/collapse (Table 6)",
                            plot_fhpm_split_collapse),
    "fhpm-monitoring": ("FHPM: memory per access-frequency bin by monitor (Table 4)", plot_fhpm_monitoring),
    "fhpm-hp-policy": ("FHPM: huge pages kept by fixed thresholds and the HP policy (Fig 8)", plot_fhpm_hp_policy),
    "fhpm-sharing": ("FHPM: memory saved vs performance and huge pages per sharing policy (Table 2 shape)",
                     plot_fhpm_sharing),
    "fhpm-tmm": ("FHPM: HMM-v-Huge vs HMM-v-Base as hot pages become unbalanced (FHPM Fig 2)", plot_fhpm_tmm),
}


def figures(data: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """The figures of one saved experiment, as (caption, Figure)."""
    require_matplotlib()
    kind = data.get("hugescope_experiment")
    if kind == "curve":
        return [("Utility curves (PCC paper Fig. 5)", plot_curve(data))]
    if kind == "frag":
        return [("Fragmentation (PCC paper Fig. 7)", plot_frag(data))]
    if kind == "sensitivity":
        return [("PCC size sensitivity (PCC paper Fig. 6)", plot_sensitivity(data))]
    if kind == "tlb-sizes":
        return [("L2 TLB size sensitivity (one pass, LRU stack distances)", plot_tlb_sizes(data))]
    if kind == "reuse":
        return [("Reuse distance scatter (PCC paper Fig. 2)", plot_reuse(data)),
                ("Reuse classes per region", plot_reuse_regions(data))]
    if kind == "multi":
        return [("Promotion policies (PCC paper Figs. 8-9)", plot_multi(data)),
                ("Huge pages per process over time", plot_timeline(data))]
    if kind == "validate":
        return [("Predicted (estimate) vs measured speedup of top-k plans", plot_validate(data))]
    if kind == "validate-suite":
        return [("Predicted (estimate) vs measured speedup of every plan of the suite", plot_validate_suite(data))]
    if kind == "ds-tables":
        out = [("Direct segments: % of cycles in page walks (ISCA'13 Table 4)", plot_ds_tables(data))]
        if data.get("gups"):
            out.append(("GUPS overhead vs footprint (ISCA'13 Fig. 5)", plot_ds_gups(data)))
        return out
    for table in (INGENS_FIGURES, NAVARRO_FIGURES, VIRT_FIGURES, FHPM_FIGURES):
        if kind in table:
            caption, plot = table[kind]
            return [(caption, plot(data))]
    return []


def figure_paths(data: Dict[str, Any], stem: str) -> List[str]:
    """The PNG paths ``save_figures`` writes for an experiment of ``data``'s
    kind (so commands can check them before the work starts)."""
    require_matplotlib()
    n = len(FIGURE_COUNTS.get(data.get("hugescope_experiment"), ()))
    return [f"{stem}.png" if i == 0 else f"{stem}-{i + 1}.png" for i in range(n)]


#: Figures per experiment kind (the captions ``figures`` gives them).
FIGURE_COUNTS = {"curve": ("curve",), "frag": ("frag",), "sensitivity": ("sensitivity",), "tlb-sizes": ("sizes",),
                 "reuse": ("scatter", "regions"), "multi": ("policies", "timeline"), "validate": ("validate",),
                 "validate-suite": ("scatter",), "ds-tables": ("tables", "gups"),
                 **{k: ("study",) for k in (*INGENS_FIGURES, *NAVARRO_FIGURES, *VIRT_FIGURES, *FHPM_FIGURES)}}


def save_figures(data: Dict[str, Any], stem: str) -> List[str]:
    """Write the figures of ``data`` as ``STEM.png``, ``STEM-2.png``, ...
    (and ``.svg`` / ``.pdf`` for the other formats in ``_io.PLOT_FORMATS``)
    through the one output writer (checked, atomic, normal modes)."""
    from . import _io

    paths = []
    for i, (_, fig) in enumerate(figures(data)):
        p = f"{stem}.png" if i == 0 else f"{stem}-{i + 1}.png"
        for fmt in _io.PLOT_FORMATS:
            last = fmt == _io.PLOT_FORMATS[-1]
            paths.append(_io.write_atomic(_io.twin(p, fmt), render(fig, fmt, close=last), kind=fmt))
    return paths
