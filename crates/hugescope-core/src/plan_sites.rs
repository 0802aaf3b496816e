//! Plans by allocation site (issue #38): from address entries to site
//! entries (`Plan::by_site`, so a plan survives a re-link) and back against
//! a trace's regions (`Plan::resolve_sites`, for a simulation). A launched
//! program resolves site entries itself, from the allocations its runtime
//! reports (`hugescope-linux`'s `launch.rs`).

use crate::plan::{Plan, PlanEntry, SiteEntry};
use crate::trace::Region;
use crate::{Error, Result};

impl Plan {
    /// The plan with every site entry replaced by range entries for the
    /// regions of `regions` that site allocated (whole pages of the entry's
    /// size inside each). A site no region has is an error: the plan was
    /// made for another program, or the trace was made without sites.
    pub fn resolve_sites(&self, regions: &[Region]) -> Result<Plan> {
        if self.sites.is_empty() {
            return Ok(self.clone());
        }
        let mut entries = self.entries.clone();
        for (i, s) in self.sites.iter().enumerate() {
            let mut found = false;
            for r in regions.iter().filter(|r| r.pid == s.pid && r.site.as_ref().is_some_and(|x| x.key == s.site)) {
                found = true;
                entries.extend(s.range_entry(r.base, r.end()));
            }
            if !found {
                return Err(Error::input(format!(
                    "plan site entry {i}: no region of the trace was allocated at '{}' (a plan by site applies to a trace \
                     of the same program made with 'hugescope trace', whose regions carry their allocation sites)",
                    s.site
                )));
            }
        }
        let plan = Plan { entries, sites: Vec::new(), ..self.clone() };
        plan.validate()?;
        Ok(plan)
    }

    /// The plan with each range entry that covers every whole page of an
    /// allocation-site region written as a site entry instead (one per
    /// site); the rest stays by address. `regions` are the trace's.
    pub fn by_site(&self, regions: &[Region]) -> Plan {
        let mut sites: Vec<SiteEntry> = Vec::new();
        let mut left: Vec<PlanEntry> = Vec::new();
        for e in &self.entries {
            // The site regions this entry covers whole (their whole pages).
            let covered: Vec<&Region> = regions
                .iter()
                .filter(|r| r.pid == e.pid && r.site.is_some())
                .filter(|r| {
                    let (s, t) = (r.base.next_multiple_of(e.page_size), r.end() / e.page_size * e.page_size);
                    t > s && s >= e.start && t <= e.end()
                })
                .collect();
            // Its whole pages must all lie in those regions; else by address.
            let pages_in = |r: &&Region| (r.end() / e.page_size).saturating_sub(r.base.div_ceil(e.page_size));
            let whole: u64 = covered.iter().map(pages_in).sum();
            if covered.is_empty() || whole * e.page_size != e.length {
                left.push(e.clone());
                continue;
            }
            for r in covered {
                let key = &r.site.as_ref().expect("filtered on sites").key;
                if !sites.iter().any(|s| &s.site == key && s.pid == e.pid) {
                    sites.push(SiteEntry { site: key.clone(), page_size: e.page_size, when: e.when.clone(), pid: e.pid, note: e.note.clone() });
                }
            }
        }
        sites.extend(self.sites.iter().cloned());
        Plan { entries: left, sites, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::When;
    use crate::trace::AllocSite;

    const M2: u64 = 2 << 20;

    fn site_region(name: &str, base: u64, len: u64, key: &str) -> Region {
        let site = AllocSite { call: "malloc".into(), size: len, frames: vec![key.into()], key: key.into(), count: 1, also: vec![] };
        Region { site: Some(Box::new(site)), ..Region::new(name, base, len) }
    }

    fn entry(start: u64, length: u64) -> PlanEntry {
        PlanEntry { start, length, page_size: M2, when: When::Start, pid: 0, note: None }
    }

    #[test]
    fn by_site_and_back_is_the_same_ranges() {
        // Two arrays: a at 0x10_0000_1000 + 9 MiB (three whole 2 MiB pages
        // from 0x10_0020_0000), b 4 MiB aligned. A plan over a's whole pages and
        // b becomes two site entries; an entry over half of a stays by address.
        let a = site_region("alloc:a", 0x10_0000_1000, 9 << 20, "a x.c:1");
        let b = site_region("alloc:b", 0x20_0000_0000, 4 << 20, "b x.c:2");
        let regions = vec![a.clone(), b.clone()];
        let plan = Plan::new(vec![entry(0x10_0020_0000, 3 * M2), entry(0x20_0000_0000, 2 * M2)]);
        let by = plan.by_site(&regions);
        assert!(by.entries.is_empty());
        assert_eq!(by.sites.iter().map(|s| s.site.as_str()).collect::<Vec<_>>(), ["a x.c:1", "b x.c:2"]);
        let back = by.resolve_sites(&regions).unwrap();
        assert_eq!(back.entries.iter().map(|e| (e.start, e.length)).collect::<Vec<_>>(), plan.entries.iter().map(|e| (e.start, e.length)).collect::<Vec<_>>());
        // Moved by a re-link: the same site entries resolve to the new addresses.
        let moved = vec![site_region("alloc:a", 0x30_0000_0000, 9 << 20, "a x.c:1"), site_region("alloc:b", 0x40_0010_0000, 4 << 20, "b x.c:2")];
        let r = by.resolve_sites(&moved).unwrap();
        assert_eq!(r.entries.iter().map(|e| (e.start, e.length)).collect::<Vec<_>>(), [(0x30_0000_0000, 4 * M2), (0x40_0020_0000, M2)]);
        // Half of a: stays by address.
        let half = Plan::new(vec![entry(0x10_0020_0000, 2 * M2)]).by_site(&regions);
        assert_eq!((half.entries.len(), half.sites.len()), (1, 0));
    }

    #[test]
    fn an_unknown_site_is_a_clear_error_and_site_plans_round_trip() {
        let by = Plan { sites: vec![SiteEntry { site: "zz q.c:9".into(), page_size: M2, when: When::Start, pid: 0, note: None }], ..Plan::new(vec![]) };
        let e = by.resolve_sites(&[]).unwrap_err().to_string();
        assert!(e.contains("no region of the trace was allocated at 'zz q.c:9'"), "{e}");
        assert_eq!(Plan::parse(&by.to_json()).unwrap(), by);
        assert_eq!(Plan::parse(&by.to_json_hex()).unwrap(), by);
        // A plan of sites only parses; bad site entries are refused with their index.
        assert_eq!(Plan::parse(r#"{"version":1,"sites":[{"site":"f a.c:1"}]}"#).unwrap().sites.len(), 1);
        for (bad, why) in [(r#"{"sites":[{"site":""}]}"#, "'site' is empty"), (r#"{"sites":[{"site":"f","page_size":3000}]}"#, "power of two"),
                           (r#"{"sites":[{"site":"f","start":0}]}"#, "unknown field 'start'"), (r#"{"sites":[{"page_size":4096}]}"#, "missing 'site'"),
                           (r#"{"sites":{}}"#, "must be a list")] {
            let e = Plan::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
