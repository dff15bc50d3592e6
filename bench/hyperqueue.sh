#!/usr/bin/env bash
# The PDE model's exact evaluations in process, from hand-started `shmc serve` instances
# (`--url A,B`), and from instances that HyperQueue runs as tasks on 1 and on 2 workers of a
# local cluster (cluster/shmc_hq.py): wall time, Evaluate calls per instance, and the protocol's
# overhead per call against the in-process run. Same seed everywhere, so every run makes the
# same draws and the same calls; only where they are answered differs.
#
#   bash bench/hyperqueue.sh [MESH] [DRAWS]      (defaults: 30, the paper's mesh, and 100)
#
# Needs python3 with hyperqueue (cli/tests/hyperqueue/requirements.txt) and a release build
# (cargo build --release -p shmc-cli; SHMC=PATH picks another binary). Writes under ${TMPDIR:-/tmp}/shmc-bench-hq.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mesh=${1:-30}
draws=${2:-100}
shmc=${SHMC:-${CARGO_TARGET_DIR:-target}/release/shmc}
work=${TMPDIR:-/tmp}/shmc-bench-hq
rm -rf "$work"
mkdir -p "$work"
run=(--chains 4 --seed 1 --warmup 50 --draws "$draws" --quiet)
pde=(--mesh "$mesh")

# seconds and the run's stdout of COMMAND..., its output folder NAME
timed() {
    local name=$1 t0
    shift
    t0=$(date +%s.%N)
    "$@" --output "$work/$name" >"$work/$name.log" 2>&1
    echo "$(echo "$(date +%s.%N) - $t0" | bc)"
}

calls() { # the run's Evaluate calls in total
    grep -o '[0-9]* served Evaluate calls' "$1" | head -1 | cut -d' ' -f1
}

sampling() { # the run's own sampling seconds (its wall time less model setup and writing)
    grep -o 'sampling [0-9.]* s' "$1" | head -1 | cut -d' ' -f2
}

per_instance() { # the dir: pool's calls per instance, or -
    grep -o 'Evaluate calls per instance: .*' "$1" | sed 's/Evaluate calls per instance: //;
        s|http://[^ ]* ||g' || echo -
}

echo "PDE mesh $mesh, 4 chains x (50 warmup + $draws draws), HMC, seed 1; $(nproc) cores"
printf '%-62s %7s %11s %7s %14s %s\n' run "wall s" "sampling s" calls "overhead/call" \
    "calls per instance"

t_in=$(timed in-process "$shmc" sample --model elliptic-pde "${pde[@]}" "${run[@]}")
s_in=$(sampling "$work/in-process.log")
printf '%-62s %7.1f %11.1f %7s %14s %s\n' "in process" "$t_in" "$s_in" - - -

served=(sample --model umbridge --umbridge-model elliptic-pde "${run[@]}")
row() { # name seconds log: the overhead is the sampling time's excess over in process
    local n s
    n=$(calls "$3")
    s=$(sampling "$3")
    printf '%-62s %7.1f %11.1f %7s %12.2fms %s\n' "$1" "$2" "$s" "$n" \
        "$(echo "($s - $s_in) * 1000 / $n" | bc -l)" "$(per_instance "$3")"
}

# Hand-started instances, one worker each.
ports=()
pids=()
for i in 0 1; do
    "$shmc" serve --model elliptic-pde "${pde[@]}" --workers 1 --port 0 \
        --url-file "$work/hand-$i.url" >/dev/null 2>&1 &
    pids+=($!)
done
for i in 0 1; do
    while [ ! -s "$work/hand-$i.url" ]; do sleep 0.1; done
    ports+=("$(cat "$work/hand-$i.url")")
done
t=$(timed hand "$shmc" "${served[@]}" --url "${ports[0]},${ports[1]}")
row "hand-started --url A,B (2 x 1 worker)" "$t" "$work/hand.log"
kill "${pids[@]}"
wait "${pids[@]}" 2>/dev/null || true

hq() { # name, shmc_hq.py options...
    local name=$1
    shift
    local t
    t=$(timed "$name" python3 cluster/shmc_hq.py "$@" --folder "$work/$name-instances" \
        --serve "$shmc serve --model elliptic-pde ${pde[*]} --workers 1" \
        -- "$shmc" "${served[@]}")
    row "HyperQueue: $*" "$t" "$work/$name.log"
}
hq one-instance --instances 1 --local-workers 1
hq one-worker --instances 2 --local-workers 1 --worker-cpus 2
hq two-workers --instances 2 --local-workers 2 --worker-cpus 1

# The same draws everywhere: the CSV rows (not the comments) of every run against in-process.
for dir in hand one-instance one-worker two-workers; do
    for c in 1 2 3 4; do
        cmp -s <(grep -v '^#' "$work/in-process/elliptic-pde-$c.csv" | tail -n +2) \
            <(grep -v '^#' "$work/$dir/umbridge-$c.csv" | tail -n +2) ||
            echo "warning: $dir chain $c draws differ from the in-process run's"
    done
done
