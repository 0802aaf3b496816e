"""The rows of the virtualization section (``papers/virt.toml`` in the core):
Ingens Table 3 on Ingens's own workloads, its §2.4 walk shares for 429.mcf,
and direct segments in a VM (ISCA'13 §3.3's reference counts per walk).

The Table 3 rows are Ingens's (``ingens.toml`` defines them, this section
includes them) and are measured by the same code (``ingens.table3``,
``ingens.table3_rows``); here their notes carry the diagnosis of the
magnitudes: per workload, the hB/gB run's split of cycles into walks, the
rest of translation and the OS (faults, VM exits), and the speedup the walks
alone would give. The §3.3 rows read ``virt_study``'s ``ds-virt`` study: the
most references of any one walk (the new ``max_refs`` counter) per machine.
Every number is the cost model's estimate or a simulator counter, on
``haswell-pcc``.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import virt_study, workloads
from . import ingens
from .common import measured, study_command

#: Machine keys turning the nested caches off: the walk ISCA'13 §3.3 counts.
NO_CACHES = ["virt.guest_pwc={}", "virt.host_pwc={}", "virt.nested_tlb.entries=0"]
#: The §3.3 rows: (row id, ds-virt machine, column of the count).
DS_ROWS = [("ds33-2d-max", "none", "max_refs_per_walk"),
           ("ds33-vmm-max", "VMM segment", "max_refs_per_walk"),
           ("ds33-guest-max", "guest segment", "guest_segment_max_refs"),
           ("ds33-both-max", "both", "guest_segment_max_refs")]


def measure(scale: str, seeds: Sequence[int], step: Callable[[str], None],
            table3: Optional[Dict[int, Any]] = None) -> tuple:
    """The section's measurements at ``scale`` over ``seeds``, and the
    evidence table (the nested and ds-virt rows per seed). ``table3``: per
    seed, ``ingens.table3`` already run at this scale (by ``reproduce
    ingens`` in the same run)."""
    import pandas as pd

    seeds = list(seeds)
    t3: List[Dict[str, Dict[str, Dict[str, Any]]]] = []
    ds: List[Dict[str, List[Dict[str, Any]]]] = []
    for seed in seeds:
        if (table3 or {}).get(seed) is not None:
            t3.append(table3[seed])
        else:
            with tempfile.TemporaryDirectory(prefix="hugescope-virt-") as tdir:
                t3.append(ingens.table3(ingens.trace_extra(tdir, scale, seed), scale))
        step(f"virt seed {seed}: Ingens Table 3 (nested)")
        ds.append(ds_tables(scale, seed))
        step(f"virt seed {seed}: direct segments in a VM")
    evidence = pd.DataFrame(
        [{**row, "study": "nested", "seed": s} for s, x in zip(seeds, t3) for w in x.values() for row in w.values()]
        + [{**row, "study": f"ds-virt ({machine})", "seed": s} for s, d in zip(seeds, ds)
           for machine, rows in d.items() for row in rows])
    out = ingens.table3_rows(scale, seeds, t3, ingens.table3_command("virt", scale, seeds),
                             note=lambda w: table3_note(w, t3[0][w], seeds[0]))
    out += ds_rows(scale, seeds, ds)
    return out, evidence


def ds_tables(scale: str, seed: int) -> Dict[str, List[Dict[str, Any]]]:
    """virt_study's ds-virt rows of one seed on two machines: ``uncached``
    (``NO_CACHES``: the walk §3.3 counts) and ``cached`` (the preset's
    nested caches: what the run's walks cost)."""
    cfg = virt_study.SCALES[scale]
    with tempfile.TemporaryDirectory(prefix="hugescope-virt-ds-") as tdir:
        paths = {}
        for label, workload in virt_study.WORKLOADS.items():
            paths[label] = os.path.join(tdir, f"{workload}.hst")
            workloads.trace(workload, paths[label], **virt_study._params(scale, label, seed))  # noqa: SLF001
        return {"uncached": virt_study._ds_virt(paths, {**cfg, "set": NO_CACHES}, lambda _: None),  # noqa: SLF001
                "cached": virt_study._ds_virt(paths, cfg, lambda _: None)}  # noqa: SLF001


def _share(r: Dict[str, Any], key: str) -> float:
    return 100 * r[key] / r["total_cycles_est"] if r["total_cycles_est"] else 0.0


def _caches(r: Dict[str, Any]) -> str:
    """How the nested caches served a run's walks (empty when not reported)."""
    if r.get("nested_tlb_hit_rate") is None:
        return ""
    return (f"; guest PWC hits {100 * (r['guest_pwc_hit_rate'] or 0):.0f}% of walks, "
            f"{r['host_walks_per_walk']:.2f} host walks per walk: nested TLB hits "
            f"{100 * r['nested_tlb_hit_rate']:.0f}%, host PWC hits {100 * (r['host_pwc_hit_rate'] or 0):.0f}%")


def table3_note(workload: str, rows: Dict[str, Dict[str, Any]], seed: int) -> str:
    """Where a Table 3 speedup comes from: the hB/gB run's cycles split into
    page walks (Ingens §2.4 measures 47.5% for 429.mcf, its most TLB-bound
    workload), the rest of translation (L2 TLB hits) and the OS (faults,
    VM exits, promotions); per configuration the references per walk, the
    most of one and how the nested caches served them, and the speedup the configuration would give if only its
    walk cycles changed (the OS held at hB/gB's)."""
    b = rows["hB/gB"]
    parts = [f"seed {seed}, {workload}, hB/gB: walks {_share(b, 'walk_cycles_est'):.1f}% of cycles "
             f"(Ingens §2.4: 47.5% for 429.mcf), other translation "
             f"{_share(b, 'translation_cycles_est') - _share(b, 'walk_cycles_est'):.1f}%, "
             f"OS {_share(b, 'os_cycles_est'):.1f}% ({b['vm_exits'] or 0:,} VM exits, "
             f"{b['vm_exit_seconds'] or 0:.2f} s)"]
    for cfg, r in rows.items():
        walks_only = b["total_cycles_est"] / (b["total_cycles_est"] - b["walk_cycles_est"] + r["walk_cycles_est"])
        parts.append(f"{cfg}: {r['speedup_est']:.3f}x ({walks_only:.3f}x from walks alone), "
                     f"{r['walks']:,} walks at {r['refs_per_walk'] or 0:.2f} references (max {r['max_refs_per_walk']}"
                     + _caches(r) + f"), OS {_share(r, 'os_cycles_est'):.1f}%")
    return "; ".join(parts)


def ds_rows(scale: str, seeds: List[int], ds: List[Dict[str, List[Dict[str, Any]]]]) -> List[Dict[str, Any]]:
    """ISCA'13 §3.3's counts from each seed's ``ds_tables``: the most
    references of one walk over the study's workloads, per machine, with the
    nested caches off (the paper's count is the walk's, before caching: its
    "up to 24" is Bhargava et al.'s uncached 2-D walk); the note gives the
    same with the preset's caches."""
    wls = list(virt_study.WORKLOADS)
    params = {w: virt_study._params(scale, w, seeds[0]) for w in wls}  # noqa: SLF001
    sources = (f"virt_study 'ds-virt' at {scale} scale: "
               + "; ".join(f"{w} ({virt_study.WORKLOADS[w]} {p}, seed varies)" for w, p in params.items())
               + f"; host and guest base pages; machine {virt_study.PRESET} with the nested caches off "
               f"({' '.join(NO_CACHES)}), and as preset for the note (guest and host page-walk caches as the "
               "native PWC, a 16-entry nested TLB: docs/assumptions.md, Virtualization); counters of the simulator")
    command = (study_command("virt", scale, seeds, "ds-virt")
               + f"; the uncached machine: hugescope simulate TRACE --host-policy base --policy base --preset "
               f"{virt_study.PRESET} --set " + " --set ".join(f"'{k}'" for k in NO_CACHES))
    out = []
    for row_id, cfg, col in DS_ROWS:
        mean_col = "guest_segment_refs_per_walk" if col == "guest_segment_max_refs" else "refs_per_walk"
        vals = [max(float(r[col] or 0) for r in d["uncached"] if r["config"] == cfg) for d in ds]
        notes = []
        for machine in ("uncached", "cached"):
            these = [r for r in ds[0][machine] if r["config"] == cfg]
            notes.append(f"{machine}: " + ", ".join(
                f"{r['workload']} {r['walks']:,} walks"
                + (f" ({r['guest_segment_walks']:,} inside the guest segment)" if col == "guest_segment_max_refs" else "")
                + f", most {r[col]}, mean {r[mean_col] or 0:.2f}" for r in these))
        out.append(measured(row_id, vals, seeds, sources, command,
                            note=f"seed {seeds[0]}, {cfg}, references per walk; " + "; ".join(notes)
                            + ". With the caches a walk reuses what earlier walks (and its own host walks) cached, "
                              "so no walk reaches the uncached count"))
    return out
