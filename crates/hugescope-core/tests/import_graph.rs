//! The core's module imports, read from `src/**/*.rs`, and the layering rules
//! they must keep (docs/architecture.md, "Layers"):
//!
//! - `config` (machine configuration as plain data) imports nothing but the
//!   crate's utilities (`error`, `units`, `strict`, the duplicate-refusing
//!   JSON/TOML readers): no run, policy, virt, sim, OS or
//!   hardware;
//! - the OS model imports no module above it (policies, runs, sweeps, the
//!   scheduler, virtualization, the simulation loop);
//! - a policy never names the kernel (`os::kernel`) or the address-space
//!   internals (`os::aspace`): it acts through `policy::Ctx`;
//! - the only import cycles are among the `impl Kernel` files of `os/` (and
//!   the policy seam, `os/ctx.rs` and `os/hooks.rs`, which the kernel
//!   dispatches through).
//!
//! A module is one file (`os/kernel.rs` is `os::kernel`, `trace/mod.rs` is
//! `trace`). An import is any `crate::`, `super::` or (in a `use`) child-module
//! path outside `#[cfg(test)]` modules and comments; a name a module
//! re-exports (`pub use kernel::Kernel` in `os/mod.rs`) counts as an import
//! of the module that defines it. `cargo test --test import_graph --
//! --nocapture` prints the whole list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// One source file: its module path, text without comments and test
/// modules, and whether it is a `mod.rs` (or the crate root).
struct Source {
    module: String,
    text: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `os/kernel.rs` -> `os::kernel`; `os/mod.rs` -> `os`; `lib.rs` -> `crate`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    match parts.as_slice() {
        [one] if one == "lib" => "crate".into(),
        [rest @ .., last] if last == "mod" => rest.join("::"),
        all => all.join("::"),
    }
}

/// The text with comments, string and char literals blanked, and every
/// `#[cfg(test)]` item (a test module) removed.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' || (b[i] == b'r' && b.get(i + 1).is_some_and(|&c| c == b'"' || c == b'#') && (i == 0 || !is_ident(b[i - 1]))) {
            // A string (raw strings: r"..", r#".."#): blanked.
            let raw = b[i] == b'r';
            let mut hashes = 0;
            if raw {
                i += 1;
                while b[i] == b'#' {
                    hashes += 1;
                    i += 1;
                }
            }
            i += 1;
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).filter(|&&c| c == b'#').count() == hashes {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3;
            out.push_str("' '");
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // An escaped char literal ('\n', '\u{..}').
            let end = b[i + 2..].iter().position(|&c| c == b'\'').map_or(b.len(), |p| i + 3 + p);
            i = end;
            out.push_str("' '");
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    strip_test_items(&out)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Remove each `#[cfg(test)]` item: up to its matching closing brace, or
/// its semicolon (`#[cfg(test)] mod x;`).
fn strip_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (brace, semi) = (after.find('{'), after.find(';'));
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = after.len();
                for (j, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every path of a `use` tree (`a::{b, c::{d, e}}` -> a::b, a::c::d,
/// a::c::e), `self` meaning the prefix itself and `x as y` the path to x.
fn use_paths(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let join = |p: &str, s: &str| if p.is_empty() { s.to_string() } else { format!("{p}::{s}") };
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        let base = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_paths(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_paths(&inner[start..], &base, out);
    } else {
        let item = tree.split(" as ").next().unwrap().trim();
        if item.is_empty() {
            return;
        }
        if item == "self" {
            out.push(prefix.to_string());
        } else {
            out.push(join(prefix, item));
        }
    }
}

/// Where the `use` declarations of a file stand: (start of the line's
/// `pub`/`use`, the end just past its semicolon), with the `use` keyword's
/// offset.
fn use_decls(code: &str) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(p) = code[from..].find("use ") {
        let at = from + p;
        from = at + 4;
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        // What stands before on the line: nothing, `pub`, `pub(crate)`...
        let line_start = code[..at].rfind('\n').map_or(0, |n| n + 1);
        let before = code[line_start..at].trim();
        if !(before.is_empty() || before.starts_with("pub")) {
            continue;
        }
        let end = code[at..].find(';').map_or(code.len(), |e| at + e + 1);
        out.push((line_start + code[line_start..at].find(before).unwrap_or(0), at, end));
        from = end;
    }
    out
}

fn use_spans(code: &str) -> Vec<(usize, usize)> {
    use_decls(code).into_iter().map(|(start, _, end)| (start, end)).collect()
}

/// The `use` declarations of a file: (is `pub use`, tree text).
fn uses(code: &str) -> Vec<(bool, String)> {
    use_decls(code)
        .into_iter()
        .map(|(start, at, end)| {
            let tree = code[at + 4..end].trim_end_matches(';');
            (code[start..at].trim().starts_with("pub"), tree.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// The code with its `use` declarations left out.
fn without_uses(code: &str) -> String {
    let mut out = String::new();
    let mut from = 0;
    for (start, end) in use_spans(code) {
        out.push_str(&code[from..start]);
        from = end;
    }
    out.push_str(&code[from..]);
    out
}

/// Whether `name` stands in `code` as a whole identifier.
fn mentions(code: &str, name: &str) -> bool {
    let b = code.as_bytes();
    code.match_indices(name).any(|(i, _)| {
        let j = i + name.len();
        (i == 0 || !is_ident(b[i - 1])) && (j >= b.len() || !is_ident(b[j]))
    })
}

/// Paths written inline (`crate::os::kernel::Kernel::new`, `super::x::y`).
fn inline_paths(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for key in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(key) {
            let at = from + p;
            from = at + key.len();
            if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':') {
                continue;
            }
            let mut end = at;
            while end < b.len() && (is_ident(b[end]) || (b[end] == b':' && b.get(end + 1) == Some(&b':') && b.get(end + 2).is_some_and(|&c| is_ident(c)))) {
                end += if b[end] == b':' { 2 } else { 1 };
            }
            // `crate::a::{b, c}` is a use tree, read whole by `use_paths`.
            if code[end..].starts_with("::{") {
                continue;
            }
            out.push(code[at..end].to_string());
        }
    }
    out
}

struct Crate {
    modules: BTreeSet<String>,
    sources: Vec<Source>,
    /// Per module: names it re-exports (`pub use`), and the absolute path each stands for.
    reexports: BTreeMap<String, BTreeMap<String, String>>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let sources: Vec<Source> = files
            .iter()
            .map(|f| Source { module: module_of(&src, f), text: code_of(&std::fs::read_to_string(f).unwrap()) })
            .collect();
        let modules: BTreeSet<String> = sources.iter().map(|s| s.module.clone()).collect();
        let mut c = Crate { modules, sources: Vec::new(), reexports: BTreeMap::new() };
        for s in &sources {
            let mut names = BTreeMap::new();
            for (public, tree) in uses(&s.text) {
                if !public {
                    continue;
                }
                let mut paths = Vec::new();
                use_paths(&tree, "", &mut paths);
                for p in paths {
                    if let Some(abs) = c.absolute(&s.module, &p, true) {
                        let name = tree_name(&tree, &p);
                        names.insert(name, abs);
                    }
                }
            }
            c.reexports.insert(s.module.clone(), names);
        }
        c.sources = sources;
        c
    }

    /// `p` as an absolute path from the crate root (no `crate::`), if it
    /// names something of this crate. `in_use`: a `use` path, where a first
    /// segment naming a child module is relative to `module`.
    fn absolute(&self, module: &str, p: &str, in_use: bool) -> Option<String> {
        let mut segs: Vec<&str> = p.split("::").collect();
        let mut base: Vec<String> = if module == "crate" { Vec::new() } else { module.split("::").map(str::to_string).collect() };
        match segs.first().copied() {
            Some("crate") => {
                base.clear();
                segs.remove(0);
            }
            Some("super") => {
                while segs.first() == Some(&"super") {
                    base.pop();
                    segs.remove(0);
                }
            }
            Some("self") => {
                segs.remove(0);
            }
            Some(first) if in_use => {
                let child = if base.is_empty() { first.to_string() } else { format!("{}::{first}", base.join("::")) };
                if !self.modules.contains(&child) {
                    return None;
                }
            }
            _ => return None,
        }
        let mut all = base;
        all.extend(segs.iter().map(|s| s.to_string()));
        Some(all.join("::"))
    }

    /// The module that defines what absolute path `p` names: the longest
    /// module prefix, then through that module's re-exports of the next
    /// name (several hops at most).
    fn defining_module(&self, p: &str) -> Option<String> {
        let mut p = p.to_string();
        for _ in 0..8 {
            let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let (m, rest) = (0..=segs.len()).rev().find_map(|n| {
                let m = if n == 0 { "crate".to_string() } else { segs[..n].join("::") };
                self.modules.contains(&m).then(|| (m, segs[n..].to_vec()))
            })?;
            match rest.first().and_then(|name| self.reexports.get(&m)?.get(*name)) {
                Some(target) if *target != p => {
                    p = std::iter::once(target.as_str()).chain(rest[1..].iter().copied()).collect::<Vec<_>>().join("::");
                }
                _ => return Some(m),
            }
        }
        None
    }

    fn graph(&self) -> Graph {
        let mut g = Graph::new();
        for s in &self.sources {
            let mut deps = BTreeSet::new();
            // A `pub use` is the module's face, not a dependency of its
            // code, unless the code itself uses the name it binds.
            let body = without_uses(&s.text);
            let mut paths = Vec::new();
            for (public, tree) in uses(&s.text) {
                let mut here = Vec::new();
                use_paths(&tree, "", &mut here);
                paths.extend(here.into_iter().filter(|p| !public || mentions(&body, &tree_name(&tree, p))));
            }
            let mut found: Vec<String> = paths.iter().filter_map(|p| self.absolute(&s.module, p, true)).collect();
            found.extend(inline_paths(&s.text).iter().filter_map(|p| self.absolute(&s.module, p, false)));
            for p in found {
                if let Some(m) = self.defining_module(&p) {
                    if m != s.module && m != "crate" {
                        deps.insert(m);
                    }
                }
            }
            g.insert(s.module.clone(), deps);
        }
        g
    }

    fn text(&self, module: &str) -> &str {
        &self.sources.iter().find(|s| s.module == module).unwrap().text
    }
}

/// The name a `use` path binds (`a::b as c` binds c).
fn tree_name(tree: &str, path: &str) -> String {
    let last = path.rsplit("::").next().unwrap().to_string();
    // `x as y` inside the tree: the renamed binding.
    let needle = format!("{last} as ");
    match tree.find(&needle) {
        Some(i) => tree[i + needle.len()..].split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or(&last).to_string(),
        None => last,
    }
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[w].min(t.low[v]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.index[w].min(t.low[v]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), next: 0, out: Vec::new() };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn under(m: &str, top: &str) -> bool {
    m == top || m.starts_with(&format!("{top}::"))
}

/// Imports of modules under `from` into modules under any of `tops`, as "a -> b".
fn imports_into(g: &Graph, from: &str, tops: &[&str]) -> Vec<String> {
    g.iter()
        .filter(|(m, _)| under(m, from))
        .flat_map(|(m, deps)| deps.iter().filter(|d| tops.iter().any(|t| under(d, t))).map(move |d| format!("{m} -> {d}")))
        .collect()
}

#[test]
fn the_core_keeps_its_layers() {
    let c = Crate::read();
    let g = c.graph();
    println!("module imports of hugescope-core ({} modules):", g.len());
    for (m, deps) in &g {
        println!("  {m} -> {}", deps.iter().cloned().collect::<Vec<_>>().join(", "));
    }
    let mut broken = Vec::new();

    // config: plain data below everything but the crate's utilities.
    for (m, deps) in g.iter().filter(|(m, _)| under(m, "config")) {
        for d in deps.iter().filter(|d| !(under(d, "config") || ["error", "units", "strict"].contains(&d.as_str()))) {
            broken.push(format!("config imports above it: {m} -> {d}"));
        }
    }
    // The OS model: nothing above it.
    let above_os = ["policy", "run", "sweep", "sched", "virt", "sim", "configuration", "bench", "tlb_sizes"];
    broken.extend(imports_into(&g, "os", &above_os).into_iter().map(|e| format!("the OS model imports above it: {e}")));
    // Policies reach the kernel through `policy::Ctx` only.
    broken.extend(
        imports_into(&g, "policy", &["os::kernel", "os::aspace"]).into_iter().map(|e| format!("a policy names the kernel's internals: {e}")),
    );
    // Cycles only among the files of os/ that make up the kernel: its
    // `impl Kernel` files, and the policy seam it dispatches through (the
    // hooks name `Ctx`, `Ctx` holds the kernel, the kernel calls the hooks).
    let seam = ["os::ctx", "os::hooks"];
    for cycle in cycles(&g) {
        let kernel_files = cycle.iter().all(|m| under(m, "os") && (c.text(m).contains("impl Kernel") || seam.contains(&m.as_str())));
        if !kernel_files {
            broken.push(format!("import cycle outside the impl Kernel files of os/: {}", cycle.join(", ")));
        }
    }
    assert!(broken.is_empty(), "{} broken rule(s):\n{}", broken.len(), broken.join("\n"));
}

/// The reader itself: a use tree, a re-export and the test-module strip.
#[test]
fn the_reader_follows_use_trees_and_reexports() {
    let mut p = Vec::new();
    use_paths("crate::os::{kernel::{Kernel, OsConfig}, self, aspace as a}", "", &mut p);
    assert_eq!(p, ["crate::os::kernel::Kernel", "crate::os::kernel::OsConfig", "crate::os", "crate::os::aspace"]);
    let code = code_of("use crate::a; // crate::b\n/* crate::c */ fn f() { \"crate::d\"; }\n#[cfg(test)]\nmod tests { use crate::e; }\n");
    assert_eq!(inline_paths(&code), ["crate::a"]);
    let c = Crate::read();
    // os/mod.rs re-exports Kernel from os/kernel.rs.
    assert_eq!(c.defining_module("os::Kernel").as_deref(), Some("os::kernel"));
    assert_eq!(c.defining_module("os::kernel::Kernel::new").as_deref(), Some("os::kernel"));
}
