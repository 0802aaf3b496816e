//! A write that fails on the encoder thread (here: the file-size limit,
//! RLIMIT_FSIZE, reached) is reported by the writer as an I/O error naming
//! the file, and no trace is left. A binary of its own: the limit is
//! process-wide.

use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, TraceHeader};
use hugescope_core::Error;

#[test]
fn a_failed_write_on_the_encoder_thread_is_an_io_error_and_leaves_no_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.hst");
    let mut w = HstWriter::create(&p, &TraceHeader::new("big"))
        .unwrap()
        .with_chunk_records(1 << 12)
        .with_encoder_thread(true);
    // SAFETY: plain libc calls on this process: ignore SIGXFSZ so an
    // oversized write fails with EFBIG instead of killing the test, and cap
    // the size of files written from now on at 64 KiB.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 64 << 10,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    // Incompressible addresses: about 6 bytes a record, far past 64 KiB.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut first_err = None;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if let Err(e) = w.write(Access::read(x & 0xffff_ffff_fff8)) {
            first_err = Some(e);
            break;
        }
    }
    let e = match first_err {
        Some(e) => {
            drop(w);
            e
        }
        None => w.finish().unwrap_err(),
    };
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("big.hst"), "{e}");
    assert!(!p.exists());
    // The writer is gone (dropped or consumed by finish): nothing remains.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
