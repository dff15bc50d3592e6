#!/usr/bin/env bash
# `shmc bench sbc`'s table in one process against the same table split into two parts, run as
# HyperQueue tasks on two workers of a local cluster (cluster/shmc_hq.py sbc) and merged: wall
# times, and whether the merged rows are the one process's (they must be: every replication
# keeps its seeds, and the merge chooses each cell's thinning from all of them).
#
#   bash bench/hyperqueue-bench-sbc.sh [MODELS] [METHODS]
#       (defaults: banana,gaussian-conjugate and hmc,rns-hmc; --quick: 30 replications a cell)
#
# Needs python3 with hyperqueue (cli/tests/hyperqueue/requirements.txt) and a release build
# (SHMC=PATH picks another binary). Writes under ${TMPDIR:-/tmp}/shmc-bench-hq-bench-sbc.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

models=${1:-banana,gaussian-conjugate}
methods=${2:-hmc,rns-hmc}
shmc=${SHMC:-${CARGO_TARGET_DIR:-target}/release/shmc}
work=${TMPDIR:-/tmp}/shmc-bench-hq-bench-sbc
rm -rf "$work"
mkdir -p "$work"
table=(bench sbc --quick --models "$models" --methods "$methods" --seed 1)

seconds() { # wall seconds of COMMAND...
    local t0
    t0=$(date +%s.%N)
    "$@" >"$work/last.log" 2>&1
    echo "$(date +%s.%N) - $t0" | bc
}

one=$(seconds "$shmc" "${table[@]}" --jobs 2 --json "$work/one.json")
two=$(seconds python3 cluster/shmc_hq.py sbc --parts 2 --local-workers 2 --worker-cpus 1 \
    --output "$work/hq" -- "$shmc" "${table[@]}" --jobs 1 --json "$work/hq.json")
rows() { # the rows of a --json file without their seconds
    python3 -c 'import json,sys; print(json.dumps([{k: v for k, v in r.items() if k != "seconds"} for r in json.load(open(sys.argv[1]))]))' "$1"
}
same=$([ "$(rows "$work/one.json")" = "$(rows "$work/hq.json")" ] && echo yes || echo NO)
echo "bench sbc --quick, models $models, methods $methods:"
echo "  one process, 2 threads:               $one s"
echo "  2 HyperQueue tasks on 2 workers:      $two s (cluster start and merge included)"
echo "  merged rows equal the one process's:  $same"
