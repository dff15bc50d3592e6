#!/usr/bin/env bash
# Proves shmc-core is no_std, allocation-free and small enough for a microcontroller:
#   1. builds the probe (a #![no_std], #![no_main] binary with no global allocator) with the
#      embedded profile of Cargo.toml (opt-level "s", LTO, one codegen unit, panic = "abort") in
#      both configurations, f64 and f32 (micromath), runs each and asserts it exits 0 (its
#      ARNS-HMC chain's banana moments within 4 MCSE, among other checks);
#   2. per configuration: prints .text per symbol (nm --size-sort), the static RAM (.data +
#      .bss) and the peak stack the probe measured, and FAILS if .text exceeds TEXT_BUDGET or if
#      a panic entry point that formats (bounds checks, slice indices, panic_fmt) is linked;
#   3. builds with each poison feature and asserts the build FAILS with the expected error
#      (std linked in: duplicate `panic_impl`; alloc linked in: no global memory allocator);
#   4. prints one summary line per configuration, `text_bytes N ...`.
# Runs from anywhere; everything it builds goes to tests/no_std/target.
set -euo pipefail

# The .text budget of each configuration, in bytes (16 KiB: issue 18). A size regression fails.
TEXT_BUDGET=16384

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manifest="$here/Cargo.toml"
target="$here/target"
logs="$target/check-logs"
mkdir -p "$logs"

fail() {
    echo "no_std check FAILED: $*" >&2
    exit 1
}

command -v size >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
    fail "size and nm (binutils) are needed"

build() { # build LOG TARGET-DIR [cargo args...]
    local log="$1" dir="$2"
    shift 2
    cargo build --release --manifest-path "$manifest" --target-dir "$dir" "$@" >"$log" 2>&1
}

section() { # section BINARY NAME: the size of one section, 0 if absent
    size -A "$1" | awk -v name="$2" '$1 == name { print $2; found = 1 } END { if (!found) print 0 }'
}

summaries=()

probe() { # probe NAME [cargo args...]
    local name="$1" dir="$target/$1"
    shift
    local probe="$dir/release/shmc-no-std-probe" log="$logs/probe-$name.log"
    echo "no_std: building the $name probe (embedded profile)"
    if ! build "$log" "$dir" "$@"; then
        cat "$log" >&2
        fail "the $name probe does not build"
    fi
    echo "no_std: running the $name probe"
    local out status=0
    out=$("$probe") || status=$?
    echo "$out"
    [ "$status" -eq 0 ] || fail "the $name probe exited with code $status (see the bits in src/main.rs)"
    local stack
    stack=$(echo "$out" | awk '$1 == "stack_bytes" { print $2 }')

    echo "no_std: $name .text per symbol, largest last (nm --size-sort; t = local, T = global)"
    nm --size-sort --print-size --demangle "$probe" | awk '$3 ~ /^[tTwW]$/' |
        while read -r _ hex kind symbol; do printf '%8d %s %s\n' "$((16#$hex))" "$kind" "$symbol"; done
    # Formatting panics: the core must not format (issue 18), and nothing else in the probe
    # does; any of these linked means some path can panic with a formatted message.
    local panics
    panics=$(nm --demangle "$probe" | grep -E 'panic_bounds_check|slice_(start_|end_)?index_(len_|order_)?fail|panicking::panic_fmt|core::fmt::' || true)
    [ -z "$panics" ] || fail "the $name probe links formatting panic code:
$panics"

    local text data bss
    text=$(section "$probe" .text)
    data=$(section "$probe" .data)
    bss=$(section "$probe" .bss)
    [ "$text" -gt 0 ] || fail "no .text section found in $probe"
    [ "$text" -le "$TEXT_BUDGET" ] ||
        fail "the $name probe's .text is $text bytes, over the budget of $TEXT_BUDGET"
    summaries+=("text_bytes $text (budget $TEXT_BUDGET) static_ram_bytes $((data + bss)) (.data $data + .bss $bss) peak_stack_bytes $stack: $name")
}

probe f64
probe f32 --features f32

poison() { # poison FEATURE EXPECTED-MESSAGE
    local feature="$1" expected="$2" log="$logs/$1.log"
    echo "no_std: building with $feature (must fail)"
    if build "$log" "$target/poison" --features "$feature"; then
        fail "the build with $feature succeeded; the probe would not notice it"
    fi
    if ! grep -qF -- "$expected" "$log"; then
        cat "$log" >&2
        fail "the build with $feature failed, but not with '$expected'"
    fi
    echo "no_std: $feature failed as expected: $(grep -m1 -F -- "$expected" "$log")"
}

poison poison-std "found duplicate lang item \`panic_impl\`"
poison poison-alloc "no global memory allocator found"

for line in "${summaries[@]}"; do
    echo "$line"
done
