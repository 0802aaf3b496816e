//! Importers of other tools' traces: exact accesses from hand-written inputs,
//! ChampSim round trips (plain and xz), windows, errors that name the file and
//! line, and no panic on arbitrary input.

use std::io::Write;
use std::path::Path;

use hugescope_core::trace::hst::read_all;
use hugescope_core::trace::import::{self, champsim, Format, ImportOptions, Window};
use hugescope_core::trace::{Access, TraceHeader};
use proptest::prelude::*;

fn decode(format: Format, input: &[u8], opts: &ImportOptions) -> hugescope_core::Result<Vec<Access>> {
    let mut out = Vec::new();
    import::decode(format, &mut &input[..], Path::new("in.txt"), opts, &mut |a| {
        out.push(a);
        Ok(())
    })?;
    Ok(out)
}

fn r(addr: u64) -> Access {
    Access::read(addr)
}
fn w(addr: u64) -> Access {
    Access::write(addr)
}

const LACKEY: &str = "==123== Lackey, an example Valgrind tool\n\
I  04017d80,3\n\
 L 7ff000f68,8\n\
 S 04232d18,8\n\
 M 0421f8a8,4\n\
\n\
==123== exit\n";

#[test]
fn lackey_exact() {
    let got = decode(Format::Lackey, LACKEY.as_bytes(), &ImportOptions::default()).unwrap();
    assert_eq!(got, vec![r(0x7ff000f68), w(0x4232d18), r(0x421f8a8), w(0x421f8a8)]);
    let opts = ImportOptions { instructions: true, ..Default::default() };
    let got = decode(Format::Lackey, LACKEY.as_bytes(), &opts).unwrap();
    assert_eq!(got[0], r(0x4017d80));
    assert_eq!(got.len(), 5);
}

#[test]
fn text_exact() {
    let input = "addr,op,cpu\n0x1000\n4096,W\n0x2000, r , 3\n# comment\n\n0X3000,w,1\r\n";
    let got = decode(Format::Text, input.as_bytes(), &ImportOptions::default()).unwrap();
    assert_eq!(got, vec![r(0x1000), w(4096), r(0x2000).on_cpu(3), w(0x3000).on_cpu(1)]);
}

#[test]
fn window_skips_then_records() {
    let input: String = (1..=10).map(|i| format!("{i}\n")).collect();
    let opts = ImportOptions { window: Window { skip: 3, record: Some(4) }, ..Default::default() };
    let got = decode(Format::Text, input.as_bytes(), &opts).unwrap();
    assert_eq!(got, vec![r(4), r(5), r(6), r(7)]);
}

fn err(format: Format, input: &[u8]) -> String {
    decode(format, input, &ImportOptions::default()).unwrap_err().to_string()
}

#[test]
fn errors_name_file_byte_and_line() {
    assert_eq!(err(Format::Text, b"0x10\nzz\n"), "in.txt: at byte 5: line 2: address 'zz' is not a number (hex with 0x, or decimal)");
    assert_eq!(err(Format::Text, b"1,X\n"), "in.txt: at byte 0: line 1: operation 'X': expected R or W");
    assert_eq!(err(Format::Text, b"1,R,999\n"), "in.txt: at byte 0: line 1: cpu id 999 exceeds the maximum 255");
    assert_eq!(err(Format::Text, b"0x1000000000000\n"), "in.txt: at byte 0: line 1: address 0x1000000000000 exceeds 48 bits");
    assert!(err(Format::Text, b"1,R,0,5\n").contains("line 1: unexpected fourth field '5'"));
    assert_eq!(err(Format::Lackey, b" L 1000,8\n X 10,1\n"), "in.txt: at byte 10: line 2: ' X 10,1': expected 'I', 'L', 'S' or 'M' then ADDR,SIZE");
    assert!(err(Format::Lackey, b" L 10q0,8\n").contains("line 1: address '10q0' is not hexadecimal"));
    assert!(err(Format::Lackey, b" S 1000,0\n").contains("line 1: size '0' is not a positive number"));
    let long = vec![b'1'; 5000];
    assert!(err(Format::Text, &long).contains("line 1: longer than 4096 bytes"));
    let cut = [champsim::record(1, &[0x10], &[]).as_slice(), &[0u8; 10]].concat();
    assert_eq!(
        err(Format::ChampSim, &cut),
        "in.txt: at byte 64: record 1: only 10 of its 64 bytes (truncated file, or not a ChampSim trace)"
    );
}

/// Known ChampSim records: loads first, then stores, zero operands skipped.
fn champsim_file(dir: &Path) -> (std::path::PathBuf, Vec<Access>) {
    let mut bytes = Vec::new();
    let mut want = Vec::new();
    for i in 0..5000u64 {
        let base = 0x7f00_0000_0000 + i * 4096;
        let loads: Vec<u64> = (0..(i % 5)).map(|k| base + 8 * k).collect();
        let stores: Vec<u64> = (0..(i % 3)).map(|k| base + 0x800 + 8 * k).collect();
        bytes.extend_from_slice(&champsim::record(0x40_0000 + i, &loads, &stores));
        want.extend(loads.iter().map(|&a| r(a)));
        want.extend(stores.iter().map(|&a| w(a)));
    }
    let p = dir.join("t.champsim");
    std::fs::write(&p, &bytes).unwrap();
    (p, want)
}

#[test]
fn champsim_roundtrip_plain_and_xz() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, want) = champsim_file(dir.path());
    let xz = dir.path().join("t.champsim.xz");
    let st = std::process::Command::new("xz")
        .args(["-kc"])
        .arg(&plain)
        .stdout(std::fs::File::create(&xz).unwrap())
        .status()
        .expect("xz is needed to make the compressed copy");
    assert!(st.success());
    for input in [&plain, &xz] {
        let out = dir.path().join("out.hst");
        let mut f = import::open_input(input).unwrap();
        let h = TraceHeader::new("imported:champsim");
        import::import(Format::ChampSim, &mut f, input, &out, &h, &ImportOptions::default()).unwrap();
        let (_, got) = read_all(&out).unwrap();
        assert_eq!(got, want, "{}", input.display());
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn corrupt_xz_is_an_error_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.champsim.xz");
    std::fs::File::create(&bad).unwrap().write_all(b"\xfd7zXZ\0 this is not xz").unwrap();
    let out = dir.path().join("out.hst");
    let mut f = import::open_input(&bad).unwrap();
    let e = import::import(Format::ChampSim, &mut f, &bad, &out, &TraceHeader::new("x"), &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("xz could not decompress"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no output or temporary left");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Arbitrary bytes never panic any importer: they import or fail with a
    /// message naming the file.
    #[test]
    fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        for f in [Format::Lackey, Format::Text, Format::ChampSim] {
            if let Err(e) = decode(f, &bytes, &ImportOptions::default()) {
                prop_assert!(e.to_string().starts_with("in.txt: "), "{}", e);
            }
        }
    }

    /// Text made of plausible pieces (numbers, ops, separators) also never panics.
    #[test]
    fn plausible_text_never_panics(lines in proptest::collection::vec(
        "(0x[0-9a-fA-F]{0,14}|[0-9]{0,21}|[LSMI ]{1,3}[0-9a-f]{0,13},[0-9]{0,3})(,[RWrwx]?)?(,[0-9]{0,4})?", 0..20)) {
        let input = lines.join("\n");
        for f in [Format::Lackey, Format::Text] {
            let _ = decode(f, input.as_bytes(), &ImportOptions::default());
        }
    }

    /// Text written from known accesses reads back exactly.
    #[test]
    fn text_roundtrip(acc in proptest::collection::vec((0u64..1 << 48, any::<bool>(), 0u16..256), 0..50)) {
        let input: String = acc.iter().enumerate().map(|(i, (a, wr, c))| {
            let op = if *wr { "W" } else { "R" };
            if i % 2 == 0 { format!("{a:#x},{op},{c}\n") } else { format!("{a},{op},{c}\n") }
        }).collect();
        let got = decode(Format::Text, input.as_bytes(), &ImportOptions::default()).unwrap();
        let want: Vec<Access> = acc.iter().map(|&(a, wr, c)| Access { addr: a, write: wr, cpu: c, pid: 0 }).collect();
        prop_assert_eq!(got, want);
    }
}

/// The tracing runtime's files, written by hand: records become accesses
/// (size bits dropped), regions come from the maps minus the buffers.
#[test]
fn runtime_records_convert() {
    use hugescope_core::trace::import::raw;
    let dir = tempfile::tempdir().unwrap();
    let (rawp, metap, out) = (dir.path().join("r"), dir.path().join("m"), dir.path().join("o.hst"));
    let recs: Vec<u64> = vec![
        0x7fff_f3c0_0010 | (3 << 56),                  // 8-byte load, thread 0
        0x5555_5555_9000 | (1 << 48) | (4 << 56) | (1 << 63), // 16-byte store, thread 1
    ];
    let mut bytes = raw::MAGIC.to_vec();
    for r in &recs {
        bytes.extend_from_slice(&r.to_le_bytes());
    }
    std::fs::write(&rawp, &bytes).unwrap();
    std::fs::write(
        &metap,
        "# exe /tmp/prog\n# threads 1\n# buffer 7ffff3e00000 7ffff4000000\n# threads 2\n# maps\n\
         555555557000-555555558000 rw-p 00003000 08:01 123 /tmp/prog\n\
         555555558000-55555555a000 rw-p 00000000 00:00 0\n\
         7ffff3c00000-7ffff4000000 rw-p 00000000 00:00 0\n",
    )
    .unwrap();
    raw::convert(&rawp, &metap, &out, TraceHeader::new("program:prog")).unwrap();
    let (h, acc) = read_all(&out).unwrap();
    assert_eq!(acc, vec![r(0x7fff_f3c0_0010), w(0x5555_5555_9000).on_cpu(1)]);
    assert_eq!(h.cpus, 2);
    let names: Vec<(&str, u64)> = h.regions.iter().map(|r| (r.name.as_str(), r.len)).collect();
    assert_eq!(names, [("data:prog", 0x1000), ("bss:prog", 0x2000), ("anon:0x7ffff3c00000", 0x200000)]);
    assert_eq!(h.regions[1].kind, hugescope_core::trace::RegionKind::Bss);
    assert_eq!(h.regions[2].kind, hugescope_core::trace::RegionKind::Anon);

    // A record of a thread the metadata does not list, a cut record, a wrong magic.
    std::fs::write(&metap, "# threads 1\n# maps\n").unwrap();
    let e = raw::convert(&rawp, &metap, &out, TraceHeader::new("p")).unwrap_err().to_string();
    assert!(e.ends_with("at byte 16: record of thread 1 but the metadata lists 1 thread(s)"), "{e}");
    std::fs::write(&rawp, &bytes[..13]).unwrap();
    let e = raw::convert(&rawp, &metap, &out, TraceHeader::new("p")).unwrap_err().to_string();
    assert!(e.ends_with("at byte 8: ends inside a record (5 of 8 bytes)"), "{e}");
    std::fs::write(&rawp, b"whatever").unwrap();
    let e = raw::convert(&rawp, &metap, &out, TraceHeader::new("p")).unwrap_err().to_string();
    assert!(e.contains("wrong magic"), "{e}");
}
