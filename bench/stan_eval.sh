#!/usr/bin/env bash
# Stan models through shmc against the same C++ timed alone, on posteriordb posteriors:
#   1. per-call cost of U and grad U: host/benches/stan_eval.rs (shmc's model: the bridgestan
#      crate, the C interface, shmc's bridge) beside bench/stan/direct.cpp (log_prob_grad in a
#      loop), at the same point; the difference is the overhead per call;
#   2. cold start (compile into an empty cache) and warm start (cached) of `shmc sample`;
#   3. chains in parallel: 1 chain against 2 chains of NUTS, wall time.
#
#   bash bench/stan_eval.sh --posteriordb DIR [POSTERIOR ...]
#       (default posteriors: eight_schools-eight_schools_noncentered diamonds-diamonds
#        nes2000-nes; DIR is posteriordb's posterior_database folder)
#
# Needs a Stan toolchain (SHMC_STAN_HOME, or httpstan for SHMC_PYTHON / python3), g++, unzip,
# and a release build (SHMC=PATH picks another binary). Give it the machine: it times.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[[ ${1:-} == --posteriordb && -n ${2:-} ]] || {
    echo "usage: bash bench/stan_eval.sh --posteriordb DIR [POSTERIOR ...]" >&2
    exit 2
}
db=$(realpath "$2")
shift 2
posteriors=("$@")
((${#posteriors[@]})) || posteriors=(eight_schools-eight_schools_noncentered diamonds-diamonds nes2000-nes)
shmc=$(realpath "${SHMC:-${CARGO_TARGET_DIR:-target}/release/shmc}")
work=${TMPDIR:-/tmp}/shmc-bench-stan
rm -rf "$work"
mkdir -p "$work"
home=${SHMC_STAN_HOME:-$("${SHMC_PYTHON:-python3}" -c 'import httpstan, os; print(os.path.dirname(httpstan.__file__))')}
flags=(-O3 -std=c++14 -g0 -DBOOST_DISABLE_ASSERTS -DBOOST_PHOENIX_NO_VARIADIC_EXPRESSION
    -DSTAN_THREADS -D_REENTRANT -D_GLIBCXX_USE_CXX11_ABI=0 -Wno-sign-compare)
cargo build --release -q -p shmc --bench stan_eval
bench=$(ls -t target/release/deps/stan_eval-* | grep -v '\.d$' | head -1)

seconds() { # wall seconds of COMMAND...
    local t0
    t0=$(date +%s.%N)
    "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log" >&2; return 1; }
    echo "$(date +%s.%N) - $t0" | bc
}

printf '%-44s %5s %12s %12s %10s %10s %10s %9s %9s %8s\n' posterior d direct_grad shmc_grad \
    overhead cold_s warm_s 1chain_s 2chain_s ratio
for posterior in "${posteriors[@]}"; do
    meta=$db/posteriors/$posterior.json
    model=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model_name'])" "$meta")
    data=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['data_name'])" "$meta")
    dir=$work/$posterior
    mkdir -p "$dir"
    cp "$db/models/stan/$model.stan" "$dir/$model.stan"
    unzip -p "$db/data/data/$data.json.zip" >"$dir/data.json"
    # 1. the C++ alone, then through shmc (the latter compiles into the bench's own cache).
    "$home/stanc" --o="$dir/model.hpp" "$dir/$model.stan" >/dev/null
    g++ "${flags[@]}" -DSHMC_STAN_MODEL_HPP="\"$dir/model.hpp\"" -I "$home/include" \
        bench/stan/direct.cpp -o "$dir/direct" -L "$home/lib" -lsundials_cvodes -lsundials_idas \
        -lsundials_nvecserial -ltbb -Wl,-rpath,"$home/lib"
    direct=$("$dir/direct" "$dir/data.json" 20000 | awk '/gradient/ {print $2}')
    export SHMC_CACHE_DIR=$dir/cache
    cold=$(seconds "$shmc" sample --model stan --stan-file "$dir/$model.stan" --data "$dir/data.json" \
        --method nuts --chains 1 --warmup 10 --draws 10 --quiet --output "$dir/cold")
    warm=$(seconds "$shmc" sample --model stan --stan-file "$dir/$model.stan" --data "$dir/data.json" \
        --method nuts --chains 1 --warmup 10 --draws 10 --quiet --output "$dir/warm")
    through=$("$bench" "$dir/$model.stan" "$dir/data.json" 20000 | awk '/gradient/ {print $2}')
    d=$("$shmc" sample --model stan \
        --stan-file "$dir/$model.stan" --data "$dir/data.json" --chains 1 --warmup 1 --draws 1 \
        --output "$dir/d" 2>&1 | sed -n 's/.*: \([0-9]*\) unconstrained parameters.*/\1/p')
    # 3. one chain against two, the same per-chain work.
    one=$(seconds "$shmc" sample --model stan --stan-file "$dir/$model.stan" --data "$dir/data.json" \
        --method nuts --chains 1 --warmup 1000 --draws 1000 --seed 1 --quiet --output "$dir/one")
    two=$(seconds "$shmc" sample --model stan --stan-file "$dir/$model.stan" --data "$dir/data.json" \
        --method nuts --chains 2 --warmup 1000 --draws 1000 --seed 1 --quiet --output "$dir/two")
    printf '%-44s %5s %10.0fns %10.0fns %8.0fns %10.1f %10.2f %9.2f %9.2f %8.2f\n' "$posterior" "$d" \
        "$direct" "$through" "$(echo "$through - $direct" | bc)" "$cold" "$warm" "$one" "$two" \
        "$(echo "$two / $one" | bc -l)"
done
