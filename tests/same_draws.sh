#!/usr/bin/env bash
# Same seed, same draws, across a restructuring: runs a fixed set of `shmc` commands with the
# binary BIN into OUT (one folder per command, its stdout beside it).
#
#   bash tests/same_draws.sh BIN OUT      # e.g. once with the old binary, once with the new
#   python3 tests/same_draws.py OLD NEW   # compares the two folders row for row
#
# Each command is short (seconds) and seeded; together they cover every method, a model of each
# kind, lockstep chains, saved warmup and a resumed run.
set -euo pipefail

bin="$1"
out="$2"
mkdir -p "$out"

run() { # run NAME ARGS...
    local name="$1"
    shift
    # A fresh folder each time: shmc refuses to write into one that holds an earlier run's files,
    # and OUT may be one this script filled before.
    rm -rf "${out:?}/$name"
    "$bin" "$@" --output "$out/$name" >"$out/$name.stdout" 2>/dev/null
}

short=(--chains 2 --warmup 200 --draws 200 --seed 7 --quiet)
run hmc-banana sample --model banana "${short[@]}"
run nuts-banana sample --model banana --method nuts "${short[@]}"
run nuts-gaussian sample --model gaussian-conjugate --method nuts --save-warmup "${short[@]}"
run rns-hmc sample --model logistic --n 500 --d 4 --method rns-hmc "${short[@]}"
run rns-hmc-laplace sample --model logistic --n 500 --d 4 --method rns-hmc --train-from laplace \
    --surrogate-steps-factor nuts "${short[@]}"
run arns-hmc sample --model logistic --n 500 --d 4 --method arns-hmc --hidden 50 --start-after 100 \
    "${short[@]}"
run vhmc sample --model beta-binomial --method vhmc "${short[@]}"
run grid-hmc sample --model banana --method grid-hmc --force-interpolation multilinear \
    "${short[@]}"
run sg-hmc sample --model banana --method sg-hmc --level 4 "${short[@]}"
run rmhmc sample --model banana --method rmhmc "${short[@]}"
run rns-rmhmc sample --model logistic --n 500 --d 3 --method rns-rmhmc --exact-warmup 100 "${short[@]}"
run sgld sample --model probit --n 500 --d 3 --method sgld "${short[@]}"
run lockstep sample --model logistic --n 2000 --d 5 --metric laplace "${short[@]}"
run pde sample --model elliptic-pde --kl-modes 5 --mesh 10 --chains 2 --warmup 100 --draws 100 \
    --seed 3 --quiet

# A run stopped by Ctrl-C resumes to the draws of an uninterrupted one; here simply a finished
# run resumed (every chain says so) and its files left as they were.
run resumed sample --model banana "${short[@]}"
"$bin" sample --resume "$out/resumed" >"$out/resumed.resume.stdout" 2>/dev/null || true
