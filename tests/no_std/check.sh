#!/usr/bin/env bash
# Proves shmc-core is no_std and allocation-free:
#   1. builds the probe (a #![no_std], #![no_main] binary with no global allocator) in release,
#      runs it and asserts it exits 0;
#   2. builds it with each poison feature and asserts the build FAILS with the expected error
#      (std linked in: duplicate `panic_impl`; alloc linked in: no global memory allocator);
#   3. prints the probe's .text size as the last line, `text_bytes N`.
# Runs from anywhere; everything it builds goes to tests/no_std/target.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manifest="$here/Cargo.toml"
target="$here/target"
logs="$target/check-logs"
probe="$target/release/shmc-no-std-probe"
mkdir -p "$logs"

fail() {
    echo "no_std check FAILED: $*" >&2
    exit 1
}

build() { # build LOG [cargo args...]
    local log="$1"
    shift
    cargo build --release --manifest-path "$manifest" --target-dir "$target" "$@" >"$log" 2>&1
}

echo "no_std: building the probe (release)"
if ! build "$logs/probe.log"; then
    cat "$logs/probe.log" >&2
    fail "the probe does not build"
fi

echo "no_std: running $probe"
status=0
"$probe" || status=$?
[ "$status" -eq 0 ] || fail "the probe exited with code $status (see the bits in src/main.rs)"

poison() { # poison FEATURE EXPECTED-MESSAGE
    local feature="$1" expected="$2" log="$logs/$1.log"
    echo "no_std: building with $feature (must fail)"
    if build "$log" --features "$feature"; then
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

# The probe's code size, from binutils: `size -A` if present, else `objdump -h`.
if command -v size >/dev/null 2>&1; then
    echo "no_std: .text size from size -A"
    text=$(size -A "$probe" | awk '$1 == ".text" { print $2 }')
elif command -v objdump >/dev/null 2>&1; then
    echo "no_std: .text size from objdump -h"
    hex=$(objdump -h "$probe" | awk '$2 == ".text" { print $3 }')
    text=$((16#${hex:-0}))
else
    fail "neither size nor objdump (binutils) is installed"
fi
[ -n "$text" ] && [ "$text" -gt 0 ] || fail "no .text section found in $probe"
echo "text_bytes $text"
