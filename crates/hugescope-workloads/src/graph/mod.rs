//! Graph kernels in the style of the GAP Benchmark Suite (Beamer, Asanović,
//! Patterson), the workloads of the PCC paper's evaluation (§4, Table 1): BFS,
//! SSSP and PageRank on Kronecker graphs (Graph500 parameters), optionally
//! reordered with degree-based grouping (DBG, Faldu et al.), as the PCC paper does
//! for half of its datasets.
//!
//! Graph construction is not traced (the papers measure only the kernel); it
//! writes the CSR straight into the fixed-address regions.

pub mod bfs;
pub mod csr;
pub mod kronecker;
pub mod load;
pub mod pagerank;
pub mod sssp;

use std::path::PathBuf;

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::Mem;
use crate::process::{Image, ImageCfg, Stepping};
use crate::registry::{common, p, ParamSpec, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub use csr::Csr;
pub use load::EdgeList;

/// Which kernel runs on the graph.
#[derive(Clone, Debug)]
pub enum Kernel {
    Bfs { direction_optimizing: bool },
    Sssp { delta: u32 },
    PageRank { iterations: u32, epsilon: f64 },
}

/// Where the graph comes from.
#[derive(Clone, Debug)]
pub enum Source {
    Kronecker { scale: u32, degree: u32 },
    Uniform { scale: u32, degree: u32 },
    /// A file, parsed at configuration time (so `plan` knows the sizes).
    File { path: PathBuf, edges: EdgeList },
}

#[derive(Clone, Debug)]
pub struct Cfg {
    pub kernel: Kernel,
    pub source: Source,
    pub dbg: bool,
    pub seed: u64,
    pub threads: usize,
    /// Stack, BSS and code regions after the graph (graph500 only: the
    /// direct-segments paper's "paged outside the segment", ISCA'13 Table 5).
    pub image: Option<ImageCfg>,
}

impl Cfg {
    /// BFS and PageRank run on the undirected (symmetrised) graph, as GAP does for
    /// the undirected Kronecker inputs; SSSP runs on the directed weighted graph.
    pub fn symmetrize(&self) -> bool {
        !matches!(self.kernel, Kernel::Sssp { .. })
    }
    pub fn weighted(&self) -> bool {
        matches!(self.kernel, Kernel::Sssp { .. })
    }
    /// (vertices, edges in the input list before symmetrisation).
    pub fn input_size(&self) -> (u64, u64) {
        match &self.source {
            Source::Kronecker { scale, degree } | Source::Uniform { scale, degree } => {
                let n = 1u64 << scale;
                (n, n * *degree as u64)
            }
            Source::File { edges, .. } => (edges.n as u64, edges.src.len() as u64),
        }
    }
    /// Upper bound on adjacency entries (before dropping self-loops/duplicates).
    pub fn entries(&self) -> u64 {
        let (_, m) = self.input_size();
        if self.symmetrize() {
            2 * m
        } else {
            m
        }
    }
}

fn graph_params(extra: Vec<ParamSpec>) -> Vec<ParamSpec> {
    let mut v = vec![
        p("generator", "str", "kronecker", "synthetic graph: 'kronecker' (Graph500 R-MAT A=0.57 B=0.19 C=0.19) or 'uniform'"),
        p("scale", "int", "20", "log2 of the number of vertices of a generated graph"),
        p("degree", "int", "16", "edge factor: generated edges per vertex (Graph500 uses 16)"),
        p("file", "path", "", "load the graph from an edge list ('u v [w]', '#'/'%' comments) or Matrix Market file instead"),
        p("dbg", "bool", "false", "degree-based grouping reordering of vertex ids (Faldu et al., HPCA'19)"),
    ];
    v.extend(extra);
    common(v)
}

pub fn infos() -> Vec<WorkloadInfo> {
    vec![
        WorkloadInfo {
            name: "bfs",
            about: "GAP breadth-first search (parent array, sliding-queue frontier, optional direction-optimizing)",
            params: graph_params(vec![p(
                "direction_optimizing",
                "bool",
                "true",
                "Beamer's direction-optimizing BFS (bottom-up steps over a bitmap; alpha=15, beta=18) as in GAP",
            )]),
        },
        WorkloadInfo {
            name: "sssp",
            about: "GAP delta-stepping single-source shortest paths on a weighted directed graph (weights 1..=255)",
            params: graph_params(vec![p("delta", "int", "16", "bucket width of delta-stepping")]),
        },
        WorkloadInfo {
            name: "pagerank",
            about: "GAP pull-based PageRank (damping 0.85) on the symmetrised graph",
            params: graph_params(vec![
                p("iterations", "int", "20", "maximum iterations"),
                p("epsilon", "float", "0.0001", "stop when the L1 change of scores falls below this (0: run all iterations)"),
            ]),
        },
        WorkloadInfo {
            name: "graph500",
            about: "Graph500 BFS (direct segments, ISCA'13): top-down BFS on a Kronecker graph, plus stack, BSS and code regions",
            params: common(vec![
                p("scale", "int", "16", "log2 of the number of vertices (Graph500 SCALE)"),
                p("degree", "int", "16", "edge factor (Graph500 uses 16)"),
            ]),
        },
    ]
}

/// graph500's non-graph memory: a 64KiB text, a 256KiB BSS and an 8MiB stack
/// per thread (glibc's default), each touched at every BFS level.
fn graph500_image(threads: usize) -> ImageCfg {
    ImageCfg { threads, stack_size: 8 << 20, bss: 256 << 10, code: 64 << 10 }
}

/// Largest scale accepted (vertex ids are 32-bit, as in GAP's default build).
pub const MAX_SCALE: u64 = 30;

pub fn config(r: &Resolved) -> Result<Cfg> {
    let kernel = match r.workload {
        "graph500" => Kernel::Bfs { direction_optimizing: false },
        "bfs" => Kernel::Bfs { direction_optimizing: r.bool("direction_optimizing")? },
        "sssp" => {
            let d = r.int_min("delta", 1)?;
            if d > u32::MAX as u64 / 2 {
                return Err(Error::input(format!("sssp: parameter 'delta' too large: {d}")));
            }
            Kernel::Sssp { delta: d as u32 }
        }
        _ => {
            let it = r.int_min("iterations", 1)?;
            if it > 1_000_000 {
                return Err(Error::input(format!("pagerank: parameter 'iterations' too large: {it}")));
            }
            let eps = r.float("epsilon")?;
            if eps < 0.0 {
                return Err(Error::input(format!("pagerank: parameter 'epsilon' must be >= 0, got {eps}")));
            }
            Kernel::PageRank { iterations: it as u32, epsilon: eps }
        }
    };
    let seed = r.int("seed")?;
    // graph500 has no generator/file/dbg parameters: the Graph500 reference
    // generator (Kronecker) on the original vertex order.
    let graph500 = r.workload == "graph500";
    let file = if graph500 { "" } else { r.str("file")? };
    let source = if !file.is_empty() {
        let path = PathBuf::from(file);
        let edges = load::load(&path)?;
        Source::File { path, edges }
    } else {
        let scale = r.int_min("scale", 1)?;
        if scale > MAX_SCALE {
            return Err(Error::input(format!(
                "{}: parameter 'scale' must be at most {MAX_SCALE} (32-bit vertex ids), got {scale}",
                r.workload
            )));
        }
        let degree = r.int_min("degree", 1)?;
        if degree > 1024 {
            return Err(Error::input(format!("{}: parameter 'degree' must be at most 1024, got {degree}", r.workload)));
        }
        let (scale, degree) = (scale as u32, degree as u32);
        match if graph500 { "kronecker" } else { r.str("generator")? } {
            "kronecker" | "kron" | "rmat" => Source::Kronecker { scale, degree },
            "uniform" | "urand" => Source::Uniform { scale, degree },
            other => {
                return Err(Error::input(format!(
                    "{}: parameter 'generator' must be 'kronecker' or 'uniform', got '{other}'",
                    r.workload
                )))
            }
        }
    };
    let threads = r.threads()?;
    let dbg = !graph500 && r.bool("dbg")?;
    let image = graph500.then(|| graph500_image(threads));
    Ok(Cfg { kernel, source, dbg, seed, threads, image })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let (n, _) = c.input_size();
    let e = c.entries();
    let mut l = Layout::new();
    l.add("offsets", (n + 1) * 8)?;
    l.add("neighbors", e * 4)?;
    match c.kernel {
        Kernel::Bfs { direction_optimizing } => {
            l.add("parent", n * 4)?;
            l.add("queue", n * 4)?;
            if direction_optimizing {
                l.add("front", n.div_ceil(64) * 8)?;
                l.add("curr", n.div_ceil(64) * 8)?;
            }
        }
        Kernel::Sssp { delta } => {
            l.add("weights", e * 4)?;
            l.add("dist", n * 4)?;
            let cap = sssp::frontier_capacity(n, e);
            l.add("frontier", cap * 4)?;
            l.add("bins", sssp::arena_chunks(n, e, delta, c.threads) * sssp::CHUNK as u64 * 4)?;
        }
        Kernel::PageRank { .. } => {
            l.add("scores", n * 4)?;
            l.add("contrib", n * 4)?;
        }
    }
    if let Some(img) = &c.image {
        img.add_regions(&mut l)?;
    }
    Ok(l)
}

/// Memory used while building: the generated edge list, the bucketed copy of
/// the counting sort and the DBG degrees.
pub fn temp_bytes(c: &Cfg) -> u64 {
    let (n, m) = c.input_size();
    let generated = if matches!(c.source, Source::File { .. }) { 0 } else { m * 8 };
    let bucketed = c.entries() * if c.weighted() { 12 } else { 8 };
    generated + bucketed + n * 8
}

/// Generate or borrow the edge list.
fn with_edges<R>(c: &Cfg, f: impl FnOnce(&EdgeList) -> Result<R>) -> Result<R> {
    match &c.source {
        Source::Kronecker { scale, degree } => f(&kronecker::kronecker(*scale, *degree, c.seed)),
        Source::Uniform { scale, degree } => f(&kronecker::uniform(*scale, *degree, c.seed)),
        Source::File { edges, .. } => f(edges),
    }
}

/// Pick a source vertex from the seed among non-isolated vertices (GAP draws
/// random sources and skips degree-0 vertices).
pub fn pick_source(g: &Csr, seed: u64) -> Result<u32> {
    let n = g.n as u64;
    let mut rng = Rng::stream(seed, 0x50_55_52_43_45);
    for _ in 0..1000 {
        let v = rng.below(n) as usize;
        if g.degree(v) > 0 {
            return Ok(v as u32);
        }
    }
    (0..g.n)
        .find(|&v| g.degree(v) > 0)
        .map(|v| v as u32)
        .ok_or_else(|| Error::input("graph has no edges: no source vertex to start from"))
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    if let Some(img) = &c.image {
        // The kernel's progress points (BFS levels) step the process image.
        let image = Image::alloc(img, l, m)?;
        let mut s = Stepping::new(m, image);
        let mut res = run_kernel(c, l, &mut s)?;
        if let Value::Object(o) = &mut res {
            o.insert("image_steps".into(), json!(s.image.globals_sum()));
            o.insert("image_acc".into(), json!(crate::hex(s.image.acc)));
        }
        return Ok(res);
    }
    run_kernel(c, l, m)
}

fn run_kernel<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let g = with_edges(c, |el| csr::build(m, l, el, c.symmetrize(), c.weighted(), c.dbg, c.seed))?;
    let mut res = match c.kernel {
        Kernel::Bfs { direction_optimizing } => {
            let src = pick_source(&g, c.seed)?;
            bfs::run(m, l, &g, src, direction_optimizing, c.threads)?.1
        }
        Kernel::Sssp { delta } => {
            let src = pick_source(&g, c.seed)?;
            sssp::run(m, l, &g, src, delta, c.threads)?.1
        }
        Kernel::PageRank { iterations, epsilon } => pagerank::run(m, l, &g, iterations, epsilon, c.threads)?.1,
    };
    if let Value::Object(o) = &mut res {
        o.insert("vertices".into(), json!(g.n));
        o.insert("edges".into(), json!(g.m()));
    }
    Ok(res)
}

/// A graph built once (heap-backed, as in trace mode) so a kernel can be traced
/// repeatedly without rebuilding it: for benchmarks and parameter sweeps.
pub struct PreparedGraph {
    pub cfg: Cfg,
    pub layout: Layout,
    pub csr: Csr,
}

/// Build the graph of a `bfs`, `sssp` or `pagerank` run once.
pub fn prepare(workload: &str, params: &crate::Params) -> Result<PreparedGraph> {
    let info = infos()
        .into_iter()
        .find(|w| w.name == workload)
        .ok_or_else(|| Error::input(format!("'{workload}' is not a graph workload (bfs, sssp, pagerank)")))?;
    let r = crate::registry::resolve(&info, params)?;
    let cfg = config(&r)?;
    let layout = layout(&cfg)?;
    let mut sink = hugescope_core::trace::CountingSink::default();
    let mut m = crate::mem::Traced::new(&mut sink);
    let csr = with_edges(&cfg, |el| csr::build(&mut m, &layout, el, cfg.symmetrize(), cfg.weighted(), cfg.dbg, cfg.seed))?;
    Ok(PreparedGraph { cfg, layout, csr })
}

/// Trace the kernel of a prepared graph into `sink`.
pub fn trace_prepared(p: &PreparedGraph, sink: &mut dyn hugescope_core::trace::AccessSink) -> Result<crate::RunOutput> {
    let mut m = crate::mem::Traced::new(sink);
    let g = &p.csr;
    let c = &p.cfg;
    let result = match c.kernel {
        Kernel::Bfs { direction_optimizing } => bfs::run(&mut m, &p.layout, g, pick_source(g, c.seed)?, direction_optimizing, c.threads)?.1,
        Kernel::Sssp { delta } => sssp::run(&mut m, &p.layout, g, pick_source(g, c.seed)?, delta, c.threads)?.1,
        Kernel::PageRank { iterations, epsilon } => pagerank::run(&mut m, &p.layout, g, iterations, epsilon, c.threads)?.1,
    };
    Ok(crate::RunOutput { result, accesses: m.accesses })
}
