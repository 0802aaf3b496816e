//! The verdict logic must be able to fail: crafted results outside the
//! tolerance, equal values under a strict ordering, inputs that equal the
//! paper's number, too few seeds. Every expected value is worked out by hand
//! in the comment beside it.

use super::*;

const FILE: &str = r#"
paper = "t"
citation = "test paper"
text = "none"

[[workload]]
name = "w"
paper_name = "W"
input = "big input"
footprint = "10GB"
run = "3 runs"
cite = "Table 1"
needs = "sparse state"

[[row]]
id = "speedup"
where = "Fig. 5"
section = "§5"
series = "W at 4%"
metric = "speedup"
unit = "x"
paper = 1.40
rule = "gain"
order = "> 1"
quote = "1.40x"
workload = "w"

[[row]]
id = "small"
where = "Fig. 8"
section = "§5.2"
series = "W, 2 threads"
metric = "speedup"
unit = "x"
paper = 1.07
rule = "gain"
quote = "1.07x"

[[row]]
id = "overhead"
where = "Table 4"
section = "§2.2"
series = "W, 4KB"
metric = "cycles in walks"
unit = "%"
paper = 51.1
rule = "percent"
quote = "51.1"
paper_scale = "the 1GB TLB must not hold the footprint"
workload = "w"

[[row]]
id = "overhead-2m"
where = "Table 4"
section = "§2.2"
series = "W, 2MB"
metric = "cycles in walks"
unit = "%"
paper = 9.9
rule = "percent"
order = "< row:overhead"
quote = "9.9"

[[row]]
id = "beats"
where = "Fig. 5"
section = "§5.1"
series = "A vs B at 4%"
metric = "speedup"
unit = "x"
paper = "A > B"
rule = "ordering"
order = "> other"
quote = "A outperforms B"

[[row]]
id = "range"
where = "text"
section = "§1"
series = "graph apps at 1-4%"
metric = "speedup"
unit = "x"
paper = [1.19, 1.33]
rule = "gain"
quote = "1.19-1.33x"

[[row]]
id = "bound"
where = "Fig. 4"
section = "§5.2"
series = "DS"
metric = "cycles in walks"
unit = "%"
paper = 0.5
shown = "< 0.5%"
rule = "below"
quote = "below 0.5%"

[[row]]
id = "calibrated"
where = "Table 4"
section = "§2.2"
series = "W, 4KB, calibrated"
metric = "cycles in walks"
unit = "%"
paper = 51.1
rule = "percent"
input = "the base cycles are fitted to this cell"
quote = "51.1"

[[row]]
id = "later"
where = "Fig. 9"
section = "§5.3"
series = "two processes"
metric = "speedup"
unit = "x"
paper = 1.1
rule = "gain"
not_attempted = "multiprocess runs are a follow-up"
quote = "1.1x"
"#;

fn file() -> PaperFile {
    PaperFile::parse("t", FILE).unwrap()
}

fn seeded(id: &str, values: &[f64]) -> Measured {
    Measured { id: id.into(), values: values.to_vec(), seeds: (1..=values.len() as u64).collect(), ..Default::default() }
}

fn run(ms: Vec<Measured>, scale: Scale) -> BTreeMap<String, Row> {
    evaluate(&file(), scale, &ms).unwrap().into_iter().map(|r| (r.id.clone(), r)).collect()
}

fn verdict(ms: Vec<Measured>, id: &str) -> (Verdict, String) {
    let r = &run(ms, Scale::Ci)[id];
    (r.verdict, r.reason.clone())
}

#[test]
fn a_value_outside_the_tolerance_is_not_reproduced() {
    // Paper 1.40x: gain 0.40, accepted 1.30..1.50. 1.60 is outside; its
    // ordering (> 1) holds by 0.6 with no spread over 3 seeds: shape.
    assert_eq!(verdict(vec![seeded("speedup", &[1.6, 1.6, 1.6])], "speedup").0, Verdict::Shape);
    // 0.9x is outside and below 1: not reproduced.
    let (v, why) = verdict(vec![seeded("speedup", &[0.9, 0.9, 0.9])], "speedup");
    assert_eq!(v, Verdict::NotReproduced);
    assert!(why.contains("outside 1.3..1.5x") && why.contains("does not hold"), "{why}");
    // Exactly 25% off (1.50x, gain 0.50 against 0.40) is within.
    assert_eq!(verdict(vec![seeded("speedup", &[1.5, 1.5, 1.5])], "speedup").0, Verdict::Reproduced);
    // The mean decides: seeds 1.45, 1.50, 1.58 average 1.51: outside.
    assert_ne!(verdict(vec![seeded("speedup", &[1.45, 1.50, 1.58])], "speedup").0, Verdict::Reproduced);
}

#[test]
fn the_two_point_rule_under_ten_percent() {
    // Paper 1.07x: gain 0.07 < 0.10, so 0.02 either side: 1.05..1.09.
    assert_eq!(verdict(vec![seeded("small", &[1.09, 1.09, 1.09])], "small").0, Verdict::Reproduced);
    assert_eq!(verdict(vec![seeded("small", &[1.05, 1.05, 1.05])], "small").0, Verdict::Reproduced);
    assert_eq!(verdict(vec![seeded("small", &[1.0901, 1.0901, 1.0901])], "small").0, Verdict::NotReproduced);
    // Table 4's 9.9% cell: 2 points, 7.9..11.9 (25% would be 2.475).
    let ok = |v: f64| verdict(vec![seeded("overhead", &[60.0; 3]), seeded("overhead-2m", &[v; 3])], "overhead-2m").0;
    assert_eq!(ok(11.9), Verdict::Reproduced);
    assert_eq!(ok(7.9), Verdict::Reproduced);
    // 12.0 is outside, but 2MB below 4KB holds (margin 48, spread 0): shape.
    assert_eq!(ok(12.0), Verdict::Shape);
    // 51.1%: 25% relative, 38.325..63.875.
    assert_eq!(verdict(vec![seeded("overhead", &[63.875; 3])], "overhead").0, Verdict::Reproduced);
    assert_eq!(verdict(vec![seeded("overhead", &[63.9; 3])], "overhead").0, Verdict::NotReproduced);
}

#[test]
fn equal_values_fail_a_strict_ordering() {
    let m = Measured { other: vec![1.2, 1.2, 1.2], other_label: Some("B".into()), ..seeded("beats", &[1.2, 1.2, 1.2]) };
    let (v, why) = verdict(vec![m], "beats");
    assert_eq!(v, Verdict::NotReproduced);
    assert!(why.contains("margin 0 vs seed spread 0"), "{why}");
    // A cross-row ordering on equal values: 2MB equal to 4KB is not "below".
    let (v, _) = verdict(vec![seeded("overhead", &[1.0; 3]), seeded("overhead-2m", &[1.0; 3])], "overhead-2m");
    assert_eq!(v, Verdict::NotReproduced);
}

#[test]
fn the_margin_must_exceed_the_seed_spread_over_three_seeds() {
    // A: 1.10, 1.12, 1.14 (mean 1.12, spread 0.04); B: 1.05, 1.06, 1.07 (mean 1.06):
    // margin 0.06 > 0.04: shape.
    let m = |a: &[f64], b: &[f64]| Measured { other: b.to_vec(), ..seeded("beats", a) };
    assert_eq!(verdict(vec![m(&[1.10, 1.12, 1.14], &[1.05, 1.06, 1.07])], "beats").0, Verdict::Shape);
    // A spread of 0.08 exceeds the 0.06 margin: not reproduced, though each seed is ordered.
    assert_eq!(verdict(vec![m(&[1.08, 1.12, 1.16], &[1.05, 1.06, 1.07])], "beats").0, Verdict::NotReproduced);
    // Two seeds cannot show a shape: not attempted, saying so.
    let (v, why) = verdict(vec![m(&[1.5, 1.5], &[1.0, 1.0])], "beats");
    assert_eq!(v, Verdict::NotAttempted);
    assert!(why.contains("needs 3 seeds") && why.contains("has 2"), "{why}");
    // A magnitude row outside its tolerance with 2 seeds is not reproduced, not a shape.
    let (v, why) = verdict(vec![seeded("speedup", &[1.6, 1.6])], "speedup");
    assert_eq!(v, Verdict::NotReproduced);
    assert!(why.contains("not testable: 2 seeds"), "{why}");
    // A deterministic value (no seed) needs no spread.
    let det = Measured { id: "speedup".into(), values: vec![1.6], ..Default::default() };
    assert_eq!(verdict(vec![det], "speedup").0, Verdict::Shape);
}

#[test]
fn an_input_row_is_never_reproduced() {
    // The static input row holds the paper's exact number.
    let (v, why) = verdict(vec![seeded("calibrated", &[51.1; 3])], "calibrated");
    assert_eq!(v, Verdict::Input);
    assert!(why.starts_with("input: the base cycles"), "{why}");
    // A run that set a parameter from a row makes it input too, even exactly on the number.
    let m = Measured { input: Some("the workload was sized to this figure".into()), ..seeded("speedup", &[1.4; 3]) };
    assert_eq!(verdict(vec![m], "speedup").0, Verdict::Input);
    // With no value at all it is still an input, not "not attempted".
    assert_eq!(verdict(vec![], "calibrated").0, Verdict::Input);
}

#[test]
fn ranges_and_bounds() {
    // 1.19..1.33x accepts 1.1425..1.4125.
    assert_eq!(verdict(vec![seeded("range", &[1.41; 3])], "range").0, Verdict::Reproduced);
    assert_eq!(verdict(vec![seeded("range", &[1.42; 3])], "range").0, Verdict::NotReproduced);
    assert_eq!(verdict(vec![seeded("bound", &[0.4999; 3])], "bound").0, Verdict::Reproduced);
    let (v, why) = verdict(vec![seeded("bound", &[0.5; 3])], "bound");
    assert_eq!(v, Verdict::NotReproduced);
    assert!(why.contains("outside < 0.5%"), "{why}");
}

#[test]
fn rows_without_values_say_why() {
    let rows = run(vec![], Scale::Ci);
    assert_eq!(rows["later"].verdict, Verdict::NotAttempted);
    assert_eq!(rows["later"].reason, "multiprocess runs are a follow-up");
    assert_eq!(rows["speedup"].reason, "this run measured no value for the row");
    let m = Measured { id: "small".into(), not_attempted: Some("no 2-thread trace".into()), ..Default::default() };
    assert_eq!(verdict(vec![m], "small").1, "no 2-thread trace");
    // At paper scale the reason names the workload's paper footprint and what it needs.
    let rows = run(vec![], Scale::Paper);
    let why = &rows["overhead"].reason;
    assert!(why.contains("W (big input; footprint 10GB) needs sparse state") && why.contains("1GB TLB must not hold"), "{why}");
    // An ordering whose reference row was not measured cannot be judged.
    let (v, why) = verdict(vec![seeded("overhead-2m", &[12.0; 3])], "overhead-2m");
    assert_eq!(v, Verdict::NotReproduced);
    assert!(why.contains("reference was not measured"), "{why}");
}

#[test]
fn bad_measurements_are_refused() {
    let f = file();
    let cases: Vec<(Vec<Measured>, &str)> = vec![
        (vec![seeded("nope", &[1.0])], "not a row"),
        (vec![seeded("speedup", &[1.0]), seeded("speedup", &[1.0])], "measured twice"),
        (vec![seeded("speedup", &[f64::NAN])], "not a finite number"),
        (vec![Measured { seeds: vec![1, 2], ..seeded("speedup", &[1.0]) }], "1 values for 2 seeds"),
    ];
    for (ms, want) in cases {
        let e = evaluate(&f, Scale::Ci, &ms).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn the_row_shows_its_values_and_rule() {
    let rows = run(vec![seeded("speedup", &[1.3, 1.4, 1.5])], Scale::Ci);
    let r = &rows["speedup"];
    assert_eq!(r.value_text, "1.4x (1.3..1.5, 3 seeds)");
    assert_eq!(r.paper_text, "1.4x");
    let (lo, hi) = (r.accepted_lo.unwrap(), r.accepted_hi.unwrap());
    assert!((lo - 1.3).abs() < 1e-12 && (hi - 1.5).abs() < 1e-12, "{lo} {hi}");
    assert!(r.tolerance.starts_with("gain (x - 1) within 25%") && r.tolerance.contains("shape: above 1"), "{}", r.tolerance);
    assert_eq!(rows["bound"].paper_text, "< 0.5%");
    assert_eq!(counts(&evaluate(&file(), Scale::Ci, &[]).unwrap()),
               vec![(Verdict::Reproduced, 0), (Verdict::Shape, 0), (Verdict::NotReproduced, 0), (Verdict::Input, 1),
                    (Verdict::NotAttempted, 8)]);
}
