//! How Redis's allocator lays out and returns its values (the part of
//! jemalloc that decides which pages a deleted value gives back): the
//! allocation a value gets (Redis's string header, then jemalloc's size
//! class), and the run (slab) those allocations share. Ingens' bloat
//! (OSDI'16 §3.2, Table 5; §6.3, Table 10) is made of this: a 4KB page goes
//! back to the OS only when every value of its run is deleted, so after 70%
//! of the keys are deleted at random a 2MB region keeps about half of its
//! pages, spread over its whole range, and Linux promotes it back whole.
//!
//! Facts used (jemalloc 4 and later, 4 KiB pages; Redis 3.2 and later):
//! - Redis keeps a value of `len` bytes as an sds string: a header of 1, 3, 5
//!   or 9 bytes by the length's range (sdshdr5/8/16/32) and a terminating
//!   NUL, allocated in one piece (`sdsnewlen`).
//! - jemalloc rounds a request up to its size class: 8, multiples of 16 up
//!   to 128, then four classes per doubling (`size_classes.sh`: for a size
//!   in (2^k, 2^(k+1)] the spacing is 2^(k-2)).
//! - Classes up to 14 KiB are *small*: their regions are packed in runs
//!   (slabs) whose size is the smallest multiple of the page that is a
//!   multiple of the class (`bin_info_run_size_calc`'s "perfect" size), and a
//!   run's pages are returned (purged) only when all its regions are free.
//!   Larger classes are page multiples, one allocation per run.
//!
//! Choices the paper leaves open, with their reasons (docs/assumptions.md,
//! "Redis's allocator"): the jemalloc generation (4 and later: the 10 KiB
//! class for an 8 KB value; jemalloc 3, bundled before Redis 3.2, has page
//! multiples above 3.5 KiB and would give 12 KiB), and that freed runs are
//! purged before the measurement (jemalloc 4.1+'s time-based decay returns
//! them within seconds; 4.0's ratio rule keeps up to 1/8 of the active pages
//! dirty, not modelled). Chunk headers (a few pages per 2MB chunk) are not
//! modelled.

/// Bytes of a page the allocator hands out and purges.
pub const PAGE: u64 = 4096;

/// Largest small size class with 4 KiB pages (jemalloc 4/5: `SMALL_MAXCLASS`).
pub const SMALL_MAX: u64 = 14 << 10;

/// Bytes Redis allocates for a string value of `len` bytes: the sds header
/// for its length range plus the terminating NUL (sds.h: sdshdr5 below 32
/// bytes, sdshdr8 below 256, sdshdr16 below 64 KiB, sdshdr32 above).
pub fn redis_string_bytes(len: u64) -> u64 {
    let header = if len < 32 {
        1
    } else if len < 256 {
        3
    } else if len < 1 << 16 {
        5
    } else {
        9
    };
    len + header + 1
}

/// jemalloc's size class for a request of `bytes` (> 0): 8, then multiples
/// of the 16-byte quantum up to 128, then four classes per doubling.
pub fn size_class(bytes: u64) -> u64 {
    if bytes <= 8 {
        return 8;
    }
    if bytes <= 128 {
        return bytes.div_ceil(16) * 16;
    }
    // (2^k, 2^(k+1)] is split into four classes of 2^(k-2).
    let k = 63 - (bytes - 1).leading_zeros() as u64;
    let delta = 1u64 << (k - 2);
    bytes.div_ceil(delta) * delta
}

/// Regions of `class` bytes per run: a small class shares runs of the
/// smallest page multiple that holds a whole number of them; a large class
/// has a run of its own.
pub fn regions_per_run(class: u64) -> u64 {
    if class > SMALL_MAX {
        return 1;
    }
    let run = lcm(class, PAGE);
    run / class
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_8kb_redis_value_takes_the_10kib_class_two_per_five_page_run() {
        // 8192 bytes + sdshdr16 (5) + NUL = 8198: above 8 KiB, so the next
        // class, 10 KiB; lcm(10240, 4096) = 20480 = 5 pages = 2 regions.
        assert_eq!(redis_string_bytes(8192), 8198);
        assert_eq!(size_class(8198), 10240);
        assert_eq!(regions_per_run(10240), 2);
        assert_eq!(lcm(10240, PAGE) / PAGE, 5);
    }

    #[test]
    fn size_classes_are_four_per_doubling() {
        let want = [(1, 8), (9, 16), (17, 32), (33, 48), (65, 80), (113, 128), (129, 160), (4096, 4096), (4097, 5120),
                    (8193, 10240), (10241, 12288), (14337, 16384), (16385, 20480)];
        for (req, class) in want {
            assert_eq!(size_class(req), class, "request {req}");
        }
        // Small classes whose runs hold several regions; a large class alone.
        assert_eq!(regions_per_run(4096), 1);
        assert_eq!(regions_per_run(5120), 4);
        assert_eq!(regions_per_run(12288), 1);
        assert_eq!(regions_per_run(16384), 1);
        assert_eq!(regions_per_run(48), 256);
        assert_eq!((redis_string_bytes(31), redis_string_bytes(200), redis_string_bytes(70000)), (33, 204, 70010));
    }
}
