#!/usr/bin/env bash
# Fuzzes every reader of outside data for SECONDS seconds each (default 30): builds the targets
# with nightly and cargo-fuzz, then runs each from its seeds in fuzz/corpus/TARGET (kept in the
# repository; what libFuzzer finds on the way goes to fuzz/target/corpus, never into the seeds).
# Any crash, panic, time-out or excess memory fails the script, with the input that caused it
# in fuzz/artifacts/TARGET/ (reproduce: cargo +nightly fuzz run TARGET ARTIFACT).
#
# Usage: bash fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
seconds="${1:-30}"
shift || true

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2
    exit 1
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# The code under test is safe Rust: no sanitizer is needed to see its bugs, and without one the
# build is faster. Debug assertions stay on, so an arithmetic overflow is a crash too.
flags=(--sanitizer none --debug-assertions)
cargo +nightly fuzz build "${flags[@]}"

for target in "${targets[@]}"; do
    work="target/corpus/$target"
    mkdir -p "$work" "corpus/$target"
    echo "=== fuzz $target: ${seconds} s"
    # -rss_limit_mb: the readers size their allocations first (a fuzzed file may ask for
    # 64 MiB); anything near a GiB is a bug. -timeout: one input taking seconds is a bug.
    log="target/fuzz-$target.log"
    if ! cargo +nightly fuzz run "${flags[@]}" "$target" "$work" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "=== fuzz $target: FAILED (the input is in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E "^#[0-9]+ +DONE|^stat::(number_of_executed_units|peak_rss_mb)" "$log" || true
done
echo "=== fuzz: every target ran ${seconds} s without a crash"
