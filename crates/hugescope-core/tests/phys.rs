//! Physical memory: buddy allocator properties, fragmentation injection
//! targets (PCC §5.1.1, Ingens §6.3) and compaction (Ingens §4.4).

use hugescope_core::os::phys::{
    CompactResult, IngensFragConfig, Migration, Mobility, Pfn, PhysMem, FRAG_OWNER,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Every allocated block: head -> (order, owner, mobility).
fn allocated_blocks(pm: &PhysMem) -> BTreeMap<Pfn, (u32, u64, Mobility)> {
    let mut out = BTreeMap::new();
    let mut p = 0;
    while p < pm.total_frames() {
        match pm.allocated_block(p) {
            Some(b) => {
                assert_eq!(b.pfn, p, "walk must land on block heads");
                out.insert(p, (b.order, b.owner, b.mobility));
                p += 1 << b.order;
            }
            None => p += 1,
        }
    }
    out
}

/// Give every allocated block a distinct owner so migrations can be traced.
fn relabel(pm: &mut PhysMem) -> BTreeMap<Pfn, (u32, u64, Mobility)> {
    let blocks = allocated_blocks(pm);
    for (i, &p) in blocks.keys().enumerate() {
        pm.set_owner(p, 1_000_000 + i as u64);
    }
    assert_eq!(pm.misuse_count(), 0);
    allocated_blocks(pm)
}

/// Replay migrations on a model and check each against the model: the block
/// at `from` had that order and owner, `to` was not in use, and at the end
/// the model equals the allocator's real state.
fn check_migrations(
    mut model: BTreeMap<Pfn, (u32, u64, Mobility)>,
    moves: &[Migration],
    pm: &PhysMem,
) {
    for m in moves {
        let (o, owner, mob) = model
            .remove(&m.from)
            .unwrap_or_else(|| panic!("migration from {} which held no block", m.from));
        assert_eq!(
            (o, owner),
            (m.order, m.owner),
            "migration {m:?} misreports the block"
        );
        assert_eq!(
            mob,
            Mobility::Movable,
            "compaction moved an unmovable block"
        );
        assert_eq!(m.to % (1 << m.order), 0, "destination misaligned");
        let overlaps = model
            .range(..m.to + (1 << m.order))
            .next_back()
            .is_some_and(|(&p, &(po, _, _))| p + (1 << po) > m.to);
        assert!(!overlaps, "migration {m:?} lands on an allocated block");
        model.insert(m.to, (o, owner, mob));
    }
    assert_eq!(
        model,
        allocated_blocks(pm),
        "owners did not move with their pages"
    );
}

// ----- buddy allocator properties --------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Alloc(u32, bool),
    AllocAt(u64, u32),
    Free(usize),
    Split(usize),
    SetOwner(usize, u64),
    BadFree(u64, u32),
    Compact(u32, u64),
    CompactAll(u32, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Mostly movable, so that compaction has something to move.
        4 => (0u32..9, 0u8..8).prop_map(|(o, m)| Op::Alloc(o, m != 0)),
        1 => (any::<u64>(), 0u32..6).prop_map(|(p, o)| Op::AllocAt(p, o)),
        3 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::Split),
        1 => (any::<usize>(), any::<u64>()).prop_map(|(i, o)| Op::SetOwner(i, o)),
        1 => (any::<u64>(), 0u32..8).prop_map(|(p, o)| Op::BadFree(p, o)),
        1 => (1u32..9, 0u64..300).prop_map(|(o, c)| Op::Compact(o, c)),
        1 => (1u32..9, 0u64..2000).prop_map(|(o, c)| Op::CompactAll(o, c)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_alloc_free_keeps_invariants(
        frames in 1u64..1500,
        max_order in 0u32..8,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut pm = PhysMem::new(frames * 4096, 4096, max_order).unwrap();
        let fresh = pm.buddyinfo();
        // head -> (order, owner, mobility); `used` marks frames handed out.
        let mut live: BTreeMap<Pfn, (u32, u64, Mobility)> = BTreeMap::new();
        let mut used = vec![false; frames as usize];
        let mut next_owner = 1u64;
        let nth = |live: &BTreeMap<Pfn, (u32, u64, Mobility)>, i: usize| {
            (!live.is_empty()).then(|| *live.iter().nth(i % live.len()).unwrap().0)
        };
        for op in ops {
            match op {
                Op::Alloc(o, movable) => {
                    let mob = if movable { Mobility::Movable } else { Mobility::Unmovable };
                    let before = if o <= max_order { pm.free_blocks_at_least(o) } else { 0 };
                    match pm.alloc(o, mob, next_owner) {
                        Some(p) => {
                            prop_assert!(o <= max_order);
                            prop_assert_eq!(p % (1 << o), 0);
                            for q in p..p + (1 << o) {
                                prop_assert!(!used[q as usize], "frame {} handed out twice", q);
                                used[q as usize] = true;
                            }
                            live.insert(p, (o, next_owner, mob));
                        }
                        None => prop_assert_eq!(before, 0, "alloc failed with a free block"),
                    }
                    next_owner += 1;
                }
                Op::AllocAt(p, o) => {
                    let p = (p % frames) & !((1u64 << o) - 1);
                    let in_range = o <= max_order && p + (1 << o) <= frames;
                    let all_free = in_range && (p..p + (1 << o)).all(|q| !used[q as usize]);
                    let got = pm.alloc_at(p, o, Mobility::Movable, next_owner);
                    prop_assert_eq!(got.is_some(), all_free);
                    if all_free {
                        for q in p..p + (1 << o) {
                            used[q as usize] = true;
                        }
                        live.insert(p, (o, next_owner, Mobility::Movable));
                    }
                    next_owner += 1;
                }
                Op::Free(i) => {
                    if let Some(p) = nth(&live, i) {
                        let (o, _, _) = live.remove(&p).unwrap();
                        pm.free(p, o);
                        for q in p..p + (1 << o) {
                            used[q as usize] = false;
                        }
                    }
                }
                Op::Split(i) => {
                    if let Some(p) = nth(&live, i) {
                        let (o, owner, mob) = live.remove(&p).unwrap();
                        pm.split(p, o);
                        for q in p..p + (1 << o) {
                            live.insert(q, (0, owner, mob));
                        }
                    }
                }
                Op::SetOwner(i, owner) => {
                    if let Some(p) = nth(&live, i) {
                        let (o, _, _) = live[&p];
                        // Any frame of the block names the block.
                        pm.set_owner(p + (owner % (1 << o)), owner);
                        live.get_mut(&p).unwrap().1 = owner;
                    }
                }
                Op::BadFree(p, o) => {
                    let p = p % (frames + 4);
                    let valid = live.get(&p).is_some_and(|&(lo, _, _)| lo == o);
                    if !valid {
                        let free_before = pm.free_frames();
                        prop_assert!(pm.try_free(p, o).is_err());
                        prop_assert_eq!(pm.free_frames(), free_before);
                    }
                }
                Op::Compact(o, cap) | Op::CompactAll(o, cap) => {
                    let mut moves = Vec::new();
                    let blocks_before = if o <= max_order { pm.free_blocks_at_least(o) } else { 0 };
                    let r = if matches!(op, Op::Compact(..)) {
                        let r = pm.compact(o, cap, &mut |m| moves.push(m));
                        prop_assert_eq!(r.success, o <= max_order && pm.free_blocks_at_least(o) >= 1);
                        r
                    } else {
                        // Empty every candidate it can ("never done").
                        pm.compact_until(o, cap, &mut |_| false, &mut |_, _, _| true, &mut |m| moves.push(m))
                    };
                    prop_assert!(r.migrated_pages <= cap);
                    prop_assert_eq!(r.migrated_pages, moves.iter().map(|m| 1u64 << m.order).sum::<u64>());
                    if o <= max_order {
                        // Compaction never consumes a free block of its order.
                        prop_assert!(pm.free_blocks_at_least(o) >= blocks_before);
                    }
                    for m in &moves {
                        let (mo, owner, mob) = live.remove(&m.from).unwrap();
                        prop_assert_eq!((mo, owner, mob), (m.order, m.owner, Mobility::Movable));
                        for q in m.from..m.from + (1 << mo) {
                            used[q as usize] = false;
                        }
                        for q in m.to..m.to + (1 << mo) {
                            prop_assert!(!used[q as usize], "migration onto used frame {}", q);
                            used[q as usize] = true;
                        }
                        live.insert(m.to, (mo, owner, mob));
                    }
                }
            }
            if let Err(e) = pm.check_invariants() {
                return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
            }
            let in_use: u64 = live.values().map(|&(o, _, _)| 1u64 << o).sum();
            prop_assert_eq!(pm.free_frames(), frames - in_use, "free memory not conserved");
            prop_assert_eq!(pm.misuse_count(), 0);
        }
        prop_assert_eq!(&allocated_blocks(&pm), &live);
        for (&p, &(o, _, _)) in &live {
            pm.free(p, o);
        }
        pm.check_invariants().unwrap();
        prop_assert_eq!(pm.free_frames(), frames);
        // Complete coalescing: the same blocks as fresh memory; and when memory
        // is a multiple of the largest block, only largest blocks.
        prop_assert_eq!(pm.buddyinfo(), fresh.clone());
        if frames % (1 << max_order) == 0 {
            let mut want = vec![0; max_order as usize + 1];
            want[max_order as usize] = frames >> max_order;
            prop_assert_eq!(fresh, want);
        }
    }
}

// ----- PCC fragmentation ------------------------------------------------------

#[test]
fn pcc_fragmentation_hits_share_and_is_deterministic() {
    for &share in &[0.1, 0.5, 0.9, 1.0] {
        for seed in [1u64, 2, 42] {
            let mut pm = PhysMem::new(GIB, 4096, 18).unwrap();
            let rep = pm.fragment_pcc(share, seed).unwrap();
            pm.check_invariants().unwrap();
            let blocked = pm.unmovable_pageblocks();
            assert_eq!(pm.pageblocks(), 512);
            let measured = blocked as f64 / 512.0;
            assert!(
                (measured - share).abs() <= 0.01,
                "share {share}: {measured}"
            );
            assert_eq!(rep.blocks_blocked, blocked);
            assert_eq!(rep.pages_pinned, blocked, "one page per blocked block");
            assert_eq!(pm.free_frames(), pm.total_frames() - blocked);
            // Each blocked block leaves 511 frames in blocks of order 0..=8.
            let want_fmfi = (blocked * 511) as f64 / pm.free_frames() as f64;
            assert!((pm.fmfi(9) - want_fmfi).abs() < 1e-12);
            assert_eq!(rep.fmfi, pm.fmfi(9));
            assert_eq!(pm.free_blocks_at_least(9), 512 - blocked);
            let pinned = allocated_blocks(&pm);
            assert!(pinned
                .values()
                .all(|&(o, owner, m)| o == 0 && owner == FRAG_OWNER && m == Mobility::Unmovable));
            // Same seed, same layout; another seed, another layout.
            let mut again = PhysMem::new(GIB, 4096, 18).unwrap();
            again.fragment_pcc(share, seed).unwrap();
            assert_eq!(allocated_blocks(&again), pinned);
            if share < 1.0 {
                let mut other = PhysMem::new(GIB, 4096, 18).unwrap();
                other.fragment_pcc(share, seed + 1000).unwrap();
                assert_ne!(
                    allocated_blocks(&other).keys().collect::<Vec<_>>(),
                    pinned.keys().collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn pcc_fragmentation_rejects_bad_input() {
    let mut pm = PhysMem::new(64 * MIB, 4096, 10).unwrap();
    assert!(pm.fragment_pcc(1.5, 1).is_err());
    assert!(pm.fragment_pcc(f64::NAN, 1).is_err());
    pm.fragment_pcc(0.75, 1).unwrap();
    // Only 8 of 32 blocks are still entirely free.
    assert!(pm.fragment_pcc(0.5, 2).is_err());
    pm.check_invariants().unwrap();
    assert_eq!(pm.release_owner(FRAG_OWNER), 24);
    assert_eq!(pm.buddyinfo()[10], 16);
}

// ----- Ingens fragmentation ---------------------------------------------------

#[test]
fn ingens_fragmentation_hits_fmfi() {
    for &target in &[0.0, 0.3, 0.5, 0.8, 0.9, 0.95] {
        for seed in [3u64, 7] {
            let mut pm = PhysMem::new(GIB, 4096, 18).unwrap();
            let rep = pm.fragment_ingens(target, seed).unwrap();
            pm.check_invariants().unwrap();
            let f = pm.fmfi(9);
            assert!((f - target).abs() <= 0.02, "target {target}: FMFI {f}");
            assert_eq!(rep.fmfi, f);
            assert_eq!(
                rep.mobility,
                Mobility::Movable,
                "paper default: a user program's pages"
            );
            // The default frees half of the region.
            assert_eq!(pm.free_frames(), pm.total_frames() / 2);
            assert_eq!(rep.pages_pinned, pm.total_frames() / 2);
            let blocks = allocated_blocks(&pm);
            assert_eq!(blocks.len() as u64, rep.pages_pinned);
            assert!(blocks
                .values()
                .all(|&(o, owner, m)| o == 0 && owner == FRAG_OWNER && m == Mobility::Movable));
            let mut again = PhysMem::new(GIB, 4096, 18).unwrap();
            again.fragment_ingens(target, seed).unwrap();
            assert_eq!(allocated_blocks(&again), blocks);
        }
    }
}

#[test]
fn ingens_fragmentation_options_and_errors() {
    let mut cfg = IngensFragConfig::new(0.85, 11);
    cfg.free_share = 0.2;
    cfg.mobility = Mobility::Unmovable;
    let mut pm = PhysMem::new(512 * MIB, 4096, 10).unwrap();
    let rep = pm.fragment_ingens_with(&cfg).unwrap();
    assert!((pm.fmfi(9) - 0.85).abs() <= 0.02);
    assert_eq!(rep.mobility, Mobility::Unmovable);
    assert_eq!(pm.unmovable_pageblocks(), rep.blocks_blocked);
    let free = pm.total_frames() / 5;
    assert!(pm.free_frames().abs_diff(free) <= 1);
    pm.check_invariants().unwrap();

    let mut pm = PhysMem::new(512 * MIB, 4096, 10).unwrap();
    assert!(pm.fragment_ingens(-0.1, 1).is_err());
    let mut bad = IngensFragConfig::new(0.9, 1);
    bad.free_share = 0.0;
    assert!(pm.fragment_ingens_with(&bad).is_err());
    // Freeing everything cannot leave any unusable memory.
    bad.free_share = 1.0;
    assert!(pm.fragment_ingens_with(&bad).is_err());
    assert_eq!(
        pm.free_frames(),
        pm.total_frames(),
        "a refused injection changes nothing"
    );
}

// ----- compaction -------------------------------------------------------------

/// Fill all free memory with movable base pages, then free every other one:
/// no 2 MB block is free, half of the remaining memory is.
fn checkerboard(pm: &mut PhysMem) {
    let mut pages = Vec::new();
    while let Some(p) = pm.alloc(0, Mobility::Movable, 5) {
        pages.push(p);
    }
    for p in pages.into_iter().step_by(2) {
        pm.free(p, 0);
    }
    assert_eq!(pm.free_blocks_at_least(9), 0);
    assert!(pm.free_frames() > 0);
}

#[test]
fn compaction_cannot_undo_unmovable_pages() {
    let mut pm = PhysMem::new(512 * MIB, 4096, 18).unwrap();
    pm.fragment_pcc(0.9, 9).unwrap();
    let blocked = pm.unmovable_pageblocks();
    let unblocked = pm.pageblocks() - blocked;
    assert_eq!(unblocked, 26); // 256 blocks, round(0.9 * 256) = 230 blocked
    checkerboard(&mut pm);
    let model = relabel(&mut pm);
    let mut moves = Vec::new();
    let r = pm.compact_until(9, u64::MAX, &mut |_| false, &mut |_, _, _| true, &mut |m| {
        moves.push(m)
    });
    assert!(!r.success);
    pm.check_invariants().unwrap();
    // Every unblocked block is recovered, and not one more.
    assert_eq!(pm.free_blocks_at_least(9), unblocked);
    assert_eq!(pm.unmovable_pageblocks(), blocked);
    assert_eq!(
        r.scanned_blocks, unblocked,
        "blocked blocks are never candidates"
    );
    assert_eq!(r.migrated_pages, moves.len() as u64);
    assert_eq!(
        r.migrated_pages,
        unblocked * 256,
        "a checkerboard block holds 256 pages"
    );
    check_migrations(model, &moves, &pm);

    // The kernel's loop "alloc 2 MB, else compact, retry" gets exactly as many.
    let mut pm = PhysMem::new(512 * MIB, 4096, 18).unwrap();
    pm.fragment_pcc(0.9, 9).unwrap();
    checkerboard(&mut pm);
    let mut huge = 0;
    for _ in 0..pm.pageblocks() {
        let got = pm.alloc(9, Mobility::Movable, 1).or_else(|| {
            pm.compact(9, u64::MAX, &mut |_| {});
            pm.alloc(9, Mobility::Movable, 1)
        });
        huge += got.is_some() as u64;
    }
    assert_eq!(huge, unblocked);
    pm.check_invariants().unwrap();
}

#[test]
fn compaction_recovers_movable_fragmentation() {
    let mut pm = PhysMem::new(GIB, 4096, 18).unwrap();
    pm.fragment_ingens(0.9, 5).unwrap();
    let before = pm.free_blocks_at_least(9);
    let model = relabel(&mut pm);
    let mut moves = Vec::new();
    // Ingens' proactive round: stop once FMFI <= 0.8 (§4.4), cap 100 MB.
    let cap = 25_600;
    let r = pm.compact_until(
        9,
        cap,
        &mut |pm| pm.fmfi(9) <= 0.8,
        &mut |_, _, _| true,
        &mut |m| moves.push(m),
    );
    pm.check_invariants().unwrap();
    assert!(r.success, "{r:?}");
    assert!(pm.fmfi(9) <= 0.8);
    assert!(pm.free_blocks_at_least(9) > before);
    assert!(r.migrated_pages > 0 && r.migrated_pages <= cap);
    check_migrations(model, &moves, &pm);

    // Unbounded, compaction packs movable pages until all but the last
    // partial block of free memory is usable.
    let model = allocated_blocks(&pm);
    let mut moves = Vec::new();
    pm.compact_until(9, u64::MAX, &mut |_| false, &mut |_, _, _| true, &mut |m| {
        moves.push(m)
    });
    pm.check_invariants().unwrap();
    assert!(pm.fmfi(9) < 0.01, "FMFI {}", pm.fmfi(9));
    check_migrations(model, &moves, &pm);

    // The same injection with unmovable pages cannot be compacted at all.
    let mut cfg = IngensFragConfig::new(0.9, 5);
    cfg.mobility = Mobility::Unmovable;
    let mut pm = PhysMem::new(GIB, 4096, 18).unwrap();
    pm.fragment_ingens_with(&cfg).unwrap();
    let before = pm.free_blocks_at_least(9);
    let r = pm.compact_until(
        9,
        u64::MAX,
        &mut |_| false,
        &mut |_, _, _| true,
        &mut |_| panic!("moved an unmovable page"),
    );
    assert_eq!((r.migrated_pages, r.scanned_blocks), (0, 0));
    assert_eq!(pm.free_blocks_at_least(9), before);
}

#[test]
fn compaction_respects_cap_veto_and_prefers_emptiest_block() {
    // 8 pageblocks: block 0 holds 3 pages, block 1 holds 100, blocks 2..8 300.
    let mut pm = PhysMem::new(16 * MIB, 4096, 9).unwrap();
    let counts = [3u64, 100, 300, 300, 300, 300, 300, 300];
    for (b, &n) in counts.iter().enumerate() {
        for i in 0..n {
            let p = b as u64 * 512 + i * (512 / n);
            assert!(pm.alloc_at(p, 0, Mobility::Movable, p).is_some());
        }
    }
    assert_eq!(pm.free_blocks_at_least(9), 0);
    // A cap below the emptiest block's 3 pages moves nothing.
    let r = pm.compact(9, 2, &mut |_| panic!("cap exceeded"));
    assert_eq!(
        r,
        CompactResult {
            success: false,
            migrated_pages: 0,
            scanned_blocks: 0
        }
    );
    // A veto on block 0 makes compaction empty block 1 instead.
    let mut moves = Vec::new();
    let r = pm.compact_until(
        9,
        u64::MAX,
        &mut |pm| pm.free_blocks_at_least(9) >= 1,
        &mut |p, _, _| p >= 512,
        &mut |m| moves.push(m),
    );
    assert!(r.success);
    assert_eq!(r.migrated_pages, 100);
    assert_eq!(r.scanned_blocks, 2);
    assert!(moves.iter().all(|m| (512..1024).contains(&m.from)));
    // Destinations: the most used blocks, not the nearly empty block 0, and
    // the highest address first (block 7 has 212 holes).
    assert!(
        moves.iter().all(|m| m.to >= 7 * 512),
        "{:?}",
        moves.iter().map(|m| m.to).collect::<Vec<_>>()
    );
    assert!(
        moves.iter().all(|m| pm.owner(m.to) == Some(m.from)),
        "owner tags move with pages"
    );
    assert_eq!(pm.owner(512), None);
    pm.check_invariants().unwrap();
    // Without a veto, block 0 (3 pages) is the cheapest.
    let mut moves = Vec::new();
    let r = pm.compact_until(
        9,
        u64::MAX,
        &mut |pm| pm.free_blocks_at_least(9) >= 2,
        &mut |_, _, _| true,
        &mut |m| moves.push(m),
    );
    assert!(r.success);
    assert_eq!(r.migrated_pages, 3);
    assert_eq!(
        moves.iter().map(|m| m.from).collect::<Vec<_>>(),
        vec![0, 170, 340]
    );
    assert_eq!(pm.buddyinfo()[9], 2);
    // Nothing to do when a free block already exists.
    assert!(pm.compact(9, 0, &mut |_| {}).success);
    pm.check_invariants().unwrap();
}

#[test]
fn compaction_below_pageblock_order() {
    // Order-4 (64 KiB) compaction inside pageblocks, as for mTHP.
    let mut pm = PhysMem::new(4 * MIB, 4096, 10).unwrap();
    for p in (0..1024).step_by(8) {
        pm.alloc_at(p, 0, Mobility::Movable, p).unwrap();
    }
    pm.alloc_at(3, 0, Mobility::Unmovable, 3).unwrap(); // blocks pageblock 0
    assert_eq!(pm.free_blocks_at_least(4), 0);
    let model = relabel(&mut pm);
    let mut moves = Vec::new();
    let r = pm.compact(4, u64::MAX, &mut |m| moves.push(m));
    assert!(r.success);
    assert_eq!(
        r.migrated_pages, 2,
        "an order-4 block holds two of the pages"
    );
    assert!(moves.iter().all(|m| m.from >= 512), "pageblock 0 is pinned");
    check_migrations(model, &moves, &pm);
    pm.check_invariants().unwrap();
}

// ----- scale ------------------------------------------------------------------

#[test]
fn sixteen_gib_injection_and_footprint() {
    let t = std::time::Instant::now();
    let mut pm = PhysMem::new(16 * GIB, 4096, 18).unwrap();
    let rep = pm.fragment_pcc(0.5, 1).unwrap();
    assert!((rep.blocked_share - 0.5).abs() <= 0.01);
    // State byte + free-list bits + per-pageblock data: under 2 bytes a frame.
    let per_frame = pm.heap_bytes() as f64 / pm.total_frames() as f64;
    assert!(per_frame < 2.0, "{per_frame} bytes per frame");
    let pcc_time = t.elapsed();

    let t = std::time::Instant::now();
    let mut pm = PhysMem::new(16 * GIB, 4096, 18).unwrap();
    pm.fragment_ingens(0.9, 1).unwrap();
    assert!((pm.fmfi(9) - 0.9).abs() <= 0.02);
    // 95% of the pageblocks hold hundreds of base pages each and carry a
    // dense 8-byte owner array: the worst case, still under 10 bytes a frame.
    let per_frame = pm.heap_bytes() as f64 / pm.total_frames() as f64;
    assert!(per_frame < 10.0, "{per_frame} bytes per frame");
    let ingens_time = t.elapsed();
    eprintln!("16 GiB: PCC injection {pcc_time:?}, Ingens injection {ingens_time:?}");
    pm.check_invariants().unwrap();
}
