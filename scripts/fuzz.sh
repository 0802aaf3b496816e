#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser a user feeds (fuzz/, libFuzzer).
#
#   scripts/fuzz.sh build              build the targets (instrumented, release)
#   scripts/fuzz.sh smoke [SECONDS]    run each target SECONDS (default 4) from its
#                                      committed seeds: what 'make test' runs
#   scripts/fuzz.sh run TARGET RUNS    run one target for RUNS inputs (the
#                                      closing-note runs: RUNS = 1000000)
#
# Stable Rust builds libFuzzer targets: libfuzzer-sys compiles libFuzzer with
# the C++ compiler, and rustc's own LLVM adds the sanitizer-coverage
# instrumentation (the flags below, as cargo-fuzz passes them; no nightly and
# no sanitizer runtime needed). The flags go to the target only
# (--target), never to build scripts, which cannot link libFuzzer's hooks.
# A crash leaves its input in fuzz/artifacts/TARGET/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

TARGETS="hst config_toml config_json plan import_champsim import_lackey import_text"
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
BIN="target/$TRIPLE/release"

build() {
    cargo build --release --quiet --target "$TRIPLE" --bins
}

# run TARGET ARGS...: fuzz from a scratch copy of the committed seeds (new
# corpus entries are not written into the repository).
run_target() {
    local t="$1"
    shift
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/hugescope-fuzz-$t.XXXXXX")"
    trap 'rm -rf "$work"' RETURN
    mkdir -p "$work/corpus" "artifacts/$t"
    cp corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
    # -rss_limit_mb: a parser that allocates in proportion to a declared size
    # crashes here; -max_len: inputs up to 64 KiB (the seeds are smaller).
    HUGESCOPE_FUZZ_DIR="$work" "$BIN/$t" "$work/corpus" -artifact_prefix="artifacts/$t/" \
        -rss_limit_mb=1024 -max_len=65536 -print_final_stats=1 "$@"
}

case "${1:-}" in
    build) build ;;
    smoke)
        build
        secs="${2:-4}"
        for t in $TARGETS; do
            echo "fuzz $t: ${secs}s"
            run_target "$t" -max_total_time="$secs" 2>"artifacts-$t.log" || { tail -30 "artifacts-$t.log"; exit 1; }
            grep -E "stat::number_of_executed_units" "artifacts-$t.log" | sed "s/^/  /"
            rm -f "artifacts-$t.log"
        done ;;
    run)
        build
        run_target "$2" -runs="$3" ;;
    *) sed -n 2,12p "$0"; exit 2 ;;
esac
