#!/usr/bin/env bash
# SBC's replications in one process against the same replications split over HyperQueue tasks
# on two workers of a local cluster (cluster/shmc_hq.py sbc): wall times, and whether the merged
# ranks are the one process's (they must be: every replication keeps its seeds).
#
#   bash bench/hyperqueue-sbc.sh [MODEL] [REPS]     (defaults: gaussian-32, 200)
#
# Needs python3 with hyperqueue (cli/tests/hyperqueue/requirements.txt) and a release build
# (SHMC=PATH picks another binary). Writes under ${TMPDIR:-/tmp}/shmc-bench-hq-sbc.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

model=${1:-gaussian-32}
reps=${2:-200}
shmc=${SHMC:-${CARGO_TARGET_DIR:-target}/release/shmc}
work=${TMPDIR:-/tmp}/shmc-bench-hq-sbc
rm -rf "$work"
mkdir -p "$work"
sbc=(sbc --model "$model" --reps "$reps" --draws 500 --warmup 500 --thin 5 --seed 1 --quiet)

seconds() { # wall seconds of COMMAND...
    local t0
    t0=$(date +%s.%N)
    "$@" >"$work/last.log" 2>&1
    echo "$(date +%s.%N) - $t0" | bc
}

one=$(seconds "$shmc" "${sbc[@]}" --jobs 2 --output "$work/one")
two=$(seconds python3 cluster/shmc_hq.py sbc --parts 2 --local-workers 2 --worker-cpus 1 \
    --output "$work/hq" -- "$shmc" "${sbc[@]}" --jobs 1)
cut -d, -f1-5,7- "$work/one/ranks.csv" >"$work/one.ranks"
cut -d, -f1-5,7- "$work/hq/ranks.csv" >"$work/hq.ranks"
same=$(cmp -s "$work/one.ranks" "$work/hq.ranks" && echo yes || echo NO)
echo "SBC of $model, $reps replications (500 + 500, thin 5):"
echo "  one process, 2 threads:               $one s"
echo "  2 HyperQueue tasks on 2 workers:      $two s (cluster start and merge included)"
echo "  merged ranks equal the one process's: $same"
