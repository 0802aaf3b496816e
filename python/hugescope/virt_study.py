"""Huge pages under virtualization (issue #13) as named studies:

* ``nested``: the four combinations of base and huge pages in the host and
  the guest (Ingens, OSDI'16, Table 3: hB/gB, hB/gH, hH/gB, hH/gH; "h" the
  host's pages of the VM's memory, i.e. the EPT leaves, "g" the guest's). Per
  workload: TLB misses (walks), nested-walk references and their cycles, the
  cost model's speedup over hB/gB, VM exits, and the huge bytes in each
  dimension. A guest 4KB miss over 4KB host pages walks 24 references; 2MB
  in one dimension 19; in both 15 (Bhargava et al., ASPLOS'08), less what
  the nested walk caches save. Ingens's claims, checked on the run: huge
  pages in both dimensions are best, and each dimension alone already helps.

* ``ds-virt``: direct segments under virtualization, an extension (Basu et
  al., ISCA'13 §3.3 designs it, does not evaluate it). Host and guest run
  ``base`` (the 24-reference worst case); per workload four machines: no
  segment, a guest segment (each guest process's primary region translates
  GVA -> GPA by an addition: a miss inside it walks only the host table), a
  VMM segment (the VM's whole GPA range -> HPA: a miss walks only the guest
  table), and both (a miss inside the guest segment makes no reference).
  Claims, checked on the run: both segments walk least, and each alone
  walks less than none.

The host runs ``base`` or ``linux`` (THP enabled=always: KVM guests' memory
is madvised for huge pages), the guest the same. Every figure is an estimate
of the cost model or a counter of the simulator.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core, api, workloads
from .studies import (VERDICT, Steps, StudyResult, Studies, check_choice, check_study_outputs, claim, num,
                      study_names, trace_dir)

#: The studies, in the order they run and are reported.
STUDIES = ["nested", "ds-virt"]

#: Ingens Table 3's four configurations: (label, host policy, guest policy).
CONFIGS: List[Tuple[str, str, str]] = [
    ("hB/gB", "base", "base"),
    ("hB/gH", "base", "linux"),
    ("hH/gB", "linux", "base"),
    ("hH/gH", "linux", "linux"),
]

#: The direct-segment machines of ds-virt: (label, guest segment, VMM segment),
#: set with the machine keys ``virt.guest_segment`` / ``virt.vmm_segment``.
DS_CONFIGS: List[Tuple[str, bool, bool]] = [
    ("none", False, False),
    ("guest segment", True, False),
    ("VMM segment", False, True),
    ("both", True, True),
]

#: Workloads of the nested study (label -> built-in workload); their sizes per scale in SCALES.
WORKLOADS: Dict[str, str] = {"GUPS": "gups", "BFS": "bfs", "KV": "kv"}

#: Per scale: workload parameters per label, and the virtual duration every
#: run is mapped onto (so the host's and guests' daemons run at CI scale).
SCALES: Dict[str, Dict[str, Any]] = {
    # "tiny": seconds, for tests: footprints still past the L2 TLB's 4MB reach.
    "tiny": {"params": {"GUPS": {"size": "8MiB", "updates": 40000},
                        "BFS": {"scale": 17, "degree": 4},
                        "KV": {"records": 16000, "ops": 20000, "value_size": 1024}},
             "os": {"duration": 2.0}},
    "ci": {"params": {"GUPS": {"size": "32MiB", "updates": 300000},
                      "BFS": {"scale": 18, "degree": 8},
                      "KV": {"records": 100000, "ops": 200000}},
           "os": {"duration": 10.0}},
    "paper": {"params": {"GUPS": {"size": "512MiB", "updates": "8M"},
                         "BFS": {"scale": 20, "degree": 16},
                         "KV": {"records": "1M", "ops": "4M"}},
              "os": {"duration": 60.0}},
}

#: The machine of every run (nested caches at their defaults: docs/assumptions.md).
PRESET = "haswell-pcc"

#: Ingens Table 3 (their measurements, speedup over hB/gB, for context only).
PAPER_NOTE = "Ingens Table 3: huge pages in both host and guest fastest; either alone helps"

#: The columns shown (terminal and report; all in the saved table).
COLUMNS = {"nested": ["workload", "config", "walks", "refs_per_walk", "walk_cycles_est", "speedup_est",
                      "vm_exits", "guest_huge_mib", "host_huge_mib"],
           "ds-virt": ["workload", "config", "walks", "walk_refs", "refs_per_walk", "walk_cycles_est",
                       "guest_segment_walk_fraction", "speedup_est"]}

#: The ds-virt study's note on the paper (it gives no measurement).
DS_PAPER_NOTE = ("ISCA'13 §3.3 (designed, not evaluated): a VMM or guest segment turns the 2-D walk "
                 "(up to 24 references) into a 1-D one (at most 4); both: none")

MIB = 1 << 20


def _row(workload: str, label: str, host: str, guest: str, d) -> Dict[str, Any]:
    """One table row from a virtualized result's record ``d``."""
    from .cost_model import walker_cycles

    t = d.translation
    v = getattr(d, "virt", None)
    exits = getattr(v, "vm_exits", None)
    walks, refs = t.walks, t.walk_refs
    pairs = list(getattr(v, "walks_by_pair", None) or [])
    hw = getattr(v, "host_walks", None)
    return {
        "workload": workload, "config": label, "host_policy": host, "guest_policy": guest,
        "walks": walks, "walk_refs": refs, "refs_per_walk": refs / walks if walks else None,
        # Cycles of the page walks alone (references and PWC hits), an estimate.
        "walk_cycles_est": walker_cycles(t, d.machine.cost),
        # The most references of any one walk (ISCA'13 §3.3's "up to 24").
        "max_refs_per_walk": max((getattr(p, "max_refs", 0) for p in pairs), default=0),
        # Where the references went: guest PWC hits per walk, host walks per
        # walk and the share the nested TLB or a host PWC level served.
        "guest_pwc_hit_rate": t.pwc_hits / walks if walks else None,
        "host_walks_per_walk": hw.host_walks / walks if hw is not None and walks else None,
        "nested_tlb_hit_rate": hw.nested_tlb_hits / hw.host_walks if hw is not None and hw.host_walks else None,
        "host_pwc_hit_rate": hw.host_pwc_hits / hw.host_walks if hw is not None and hw.host_walks else None,
        "total_cycles_est": d.cost.total_cycles,
        "translation_cycles_est": d.cost.translation_cycles,
        "os_cycles_est": d.cost.os_cycles,
        "vm_exit_seconds": getattr(v, "vm_exit_seconds", None),
        "vm_exits": getattr(exits, "total", None),
        "vm_exits_first_touch": getattr(exits, "ept_violation_first_touch", None),
        "vm_exits_after_zap": getattr(exits, "ept_violation_after_zap", None),
        "guest_huge_mib": (getattr(v, "guest_huge_bytes", None) or 0) / MIB,
        "host_huge_mib": (getattr(v, "host_huge_bytes", None) or 0) / MIB,
        "walks_by_pair": ", ".join(f"{p.guest}/{p.host} {p.walks}" for p in pairs),
        "kind": "estimate",
    }


def _nested(paths: Dict[str, str], cfg: Dict[str, Any], step) -> List[Dict[str, Any]]:
    """Every configuration on every workload: one compare per host policy
    (both guest policies on one decoding pass)."""
    rows = []
    hosts = list(dict.fromkeys(h for _, h, _ in CONFIGS))
    for wl, path in paths.items():
        by_label: Dict[str, Dict[str, Any]] = {}
        for host in hosts:
            members = [(label, guest) for label, h, guest in CONFIGS if h == host]
            results = api.compare(path, [g for _, g in members], preset=PRESET, host_policy=host, with_base=False,
                                  **cfg["os"])
            for (label, guest), r in zip(members, results):
                by_label[label] = _row(wl, label, host, guest, r.record)
            step(f"{wl}: host {host}")
        ref = by_label["hB/gB"]["total_cycles_est"]
        for label, _, _ in CONFIGS:
            r = by_label[label]
            r["speedup_est"] = ref / r["total_cycles_est"] if r["total_cycles_est"] else None
            rows.append(r)
    return rows


def _ds_virt(paths: Dict[str, str], cfg: Dict[str, Any], step) -> List[Dict[str, Any]]:
    """Every direct-segment machine on every workload, host and guest ``base``
    (``cfg["set"]``: more machine keys, e.g. the nested caches off)."""
    rows = []
    for wl, path in paths.items():
        by_label: Dict[str, Dict[str, Any]] = {}
        for label, gs, vs in DS_CONFIGS:
            keys = [f"virt.guest_segment={'on' if gs else 'off'}", f"virt.vmm_segment={'on' if vs else 'off'}",
                    *cfg.get("set", [])]
            r = api.compare(path, ["base"], preset=PRESET, set=keys, host_policy="base", with_base=False,
                            **cfg["os"])[0]
            row = _row(wl, label, "base", "base", r.record)
            v = getattr(r.record, "virt", None)
            seg = getattr(v, "guest_segment_walks", None)
            row["guest_segment_walk_fraction"] = (seg / row["walks"] if seg is not None and row["walks"] else
                                                  (0.0 if not gs else None))
            # The walks inside the guest segment alone: 1-D (ISCA'13 §3.3).
            seg_refs = getattr(v, "guest_segment_walk_refs", None)
            row["guest_segment_walks"] = seg
            row["guest_segment_refs_per_walk"] = seg_refs / seg if seg and seg_refs is not None else None
            row["guest_segment_max_refs"] = getattr(v, "guest_segment_max_refs", None)
            by_label[label] = row
            step(f"{wl}: {label}")
        ref = by_label["none"]["total_cycles_est"]
        for label, _, _ in DS_CONFIGS:
            r = by_label[label]
            r["speedup_est"] = ref / r["total_cycles_est"] if r["total_cycles_est"] else None
            rows.append(r)
    return rows


def _by(rows, workload: str) -> Dict[str, Dict[str, Any]]:
    return {r["config"]: r for r in rows if r["workload"] == workload}


def shape_checks(study: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Ingens Table 3's claims on these rows, per workload."""
    out: List[Dict[str, Any]] = []
    if study == "ds-virt":
        return _ds_checks(rows)
    if study != "nested":
        return out
    for wl in dict.fromkeys(r["workload"] for r in rows):
        b = _by(rows, wl)
        wc = {k: num(b.get(k, {}).get("walk_cycles_est")) for k, _, _ in CONFIGS}
        ok = None if None in wc.values() else all(wc["hH/gH"] <= wc[k] for k in wc)
        claim(out, f"{wl}: huge pages in both host and guest walk least (Ingens Table 3: hH/gH best)", ok,
              ", ".join(f"{k} {v:,.0f}" for k, v in wc.items() if v is not None) + " walk cycles")
        ok2 = None if None in wc.values() else (wc["hB/gH"] < wc["hB/gB"] and wc["hH/gB"] < wc["hB/gB"])
        claim(out, f"{wl}: huge pages in either dimension alone already cut walk cycles (hB/gH, hH/gB < hB/gB)", ok2,
              f"hB/gH {wc['hB/gH']:,.0f}, hH/gB {wc['hH/gB']:,.0f} vs hB/gB {wc['hB/gB']:,.0f}"
              if ok2 is not None else "n/a")
        rpw = num(b.get("hB/gB", {}).get("refs_per_walk"))
        claim(out, f"{wl}: a base/base nested walk makes at most 24 references (Bhargava et al.: (4+1)(4+1)-1)",
              None if rpw is None else rpw <= 24.0, "n/a" if rpw is None else f"{rpw:.2f} per walk with the nested caches")
    return out


def _ds_checks(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """ISCA'13 §3.3's expectations (not measured in the paper), per workload:
    both segments < either alone < none, in walk cycles."""
    out: List[Dict[str, Any]] = []
    labels = [k for k, _, _ in DS_CONFIGS]
    for wl in dict.fromkeys(r["workload"] for r in rows):
        b = _by(rows, wl)
        wc = {k: num(b.get(k, {}).get("walk_cycles_est")) for k in labels}
        shown = ", ".join(f"{k} {v:,.0f}" for k, v in wc.items() if v is not None) + " walk cycles (estimates)"
        ok = None if None in wc.values() else (wc["both"] < wc["guest segment"] and wc["both"] < wc["VMM segment"])
        claim(out, f"{wl}: both segments walk least (ISCA'13 §3.3, extension: both < either)", ok, shown)
        ok2 = None if None in wc.values() else (wc["guest segment"] < wc["none"] and wc["VMM segment"] < wc["none"])
        claim(out, f"{wl}: either segment alone walks less than none (a 1-D walk instead of a 2-D one)", ok2, shown)
    return out


def check_args(studies, scale: str) -> List[str]:
    """The studies to run; a bad name or scale gives one error line."""
    names = study_names(studies, STUDIES)
    check_choice(scale, "scale", list(SCALES))
    return names


def _params(scale: str, label: str, seed: int) -> Dict[str, Any]:
    return {**SCALES[scale]["params"].get(label, {}), "seed": seed}


def virt_studies(studies: Optional[Sequence[str]] = None, scale: str = "ci", seed: int = 1,
                 traces: Optional[str] = None,
                 progress: Optional[Callable[[str, int, int], None]] = None) -> Studies:
    """Run the virtualization studies (module docstring): ``studies`` a
    subset of ``STUDIES`` (default all), ``scale`` ``"ci"`` or ``"paper"``,
    ``seed`` of every workload; ``traces`` a directory to keep the generated
    traces in (default a temporary one)."""
    import pandas as pd

    names = check_args(studies, scale)
    seed = int(seed)
    cfg = SCALES[scale]
    hosts = len(dict.fromkeys(h for _, h, _ in CONFIGS))
    runs = {"nested": hosts, "ds-virt": len(DS_CONFIGS)}
    step = Steps(sum(len(WORKLOADS) * (1 + runs[s]) for s in names), progress)
    out: Dict[str, StudyResult] = {}
    with trace_dir(traces, "hugescope-virt-") as tdir:
        for s in names:
            paths: Dict[str, str] = {}
            for label, workload in WORKLOADS.items():
                paths[label] = os.path.join(tdir, f"virt-{workload}.hst")
                workloads.trace(workload, paths[label], **_params(scale, label, seed))
                step(f"{s}: trace {label}")
            run = _ds_virt if s == "ds-virt" else _nested
            rows = run(paths, cfg, lambda what, s=s: step(f"{s}: {what}"))
            meta = {"hugescope_version": _core.version(), "kind": "estimate", "study": s, "scale": scale,
                    "preset": PRESET, "seed": seed,
                    "workloads": {lbl: [wl, _params(scale, lbl, seed)] for lbl, wl in WORKLOADS.items()},
                    "os_options": cfg["os"],
                    "configs": [list(c) for c in (DS_CONFIGS if s == "ds-virt" else CONFIGS)],
                    "paper": DS_PAPER_NOTE if s == "ds-virt" else PAPER_NOTE}
            if s == "ds-virt":
                meta["extension"] = "ISCA'13 §3.3 designs direct segments for VMs but does not evaluate them"
            out[s] = StudyResult("virt", s, pd.DataFrame(rows), {}, meta, shape_checks)
    meta = {"hugescope_studies": "virt", "hugescope_version": _core.version(), "kind": "estimate",
            "scale": scale, "seed": seed, "studies": names, "presets": {s: PRESET for s in names}}
    return Studies(out, meta)


def headlines(result: Studies) -> List[Dict[str, Any]]:
    """One line per study: walk cycles of the four configurations per
    workload, and whether all claims hold."""
    out = []
    for name, s in result.studies.items():
        rows = s.table.to_dict("records")
        ds = name == "ds-virt"
        labels = [c[0] for c in (DS_CONFIGS if ds else CONFIGS)]
        here = "; ".join(f"{wl} " + "/".join(f"{num(_by(rows, wl).get(k, {}).get('speedup_est')) or 0:.2f}"
                                             for k in labels)
                         for wl in dict.fromkeys(r["workload"] for r in rows))
        verdicts = [c["holds"] for c in s.checks()]
        holds = False if False in verdicts else (None if None in verdicts or not verdicts else True)
        out.append({"study": name, "this run (estimates)": f"speedup {', '.join(labels)}: {here}",
                    "paper": DS_PAPER_NOTE if ds else PAPER_NOTE, "claims": VERDICT[holds]})
    return out


def save(result: Studies, out: str, plots: bool = True) -> Dict[str, str]:
    """Write each study's ``OUT/virt-STUDY.csv``, ``-checks.csv``, ``.json`` and figure."""
    return result.save(out, plots)


def check_outputs(out: str, studies: Optional[Sequence[str]] = None, plots: bool = True) -> None:
    """Before any trace is made: refuse any file :func:`save` would write."""
    for s in study_names(studies, STUDIES):
        check_study_outputs(f"virt-{s}", out, f"virt-{s}", ("checks",), plots)
