//! A Stan model's `U` and `∇U` timed through shmc's model (the `bridgestan` crate, the C
//! interface, shmc's bridge): what bench/stan_eval.sh sets beside the same model's C++ timed
//! alone (bench/stan/direct.cpp), at the same point (0.1 in every coordinate).
//!
//! usage: cargo bench -p shmc --bench stan_eval -- PROGRAM.stan DATA.json CALLS

use std::time::Instant;

use shmc::models::{self, ModelSpec};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let [program, data, calls] = args.as_slice() else {
        return Err("usage: stan_eval PROGRAM.stan DATA.json CALLS".into());
    };
    let calls: u32 = calls.parse().map_err(|e| format!("CALLS: {e}"))?;
    let spec = ModelSpec::named("stan")
        .with("stan_file", program)
        .with("data", data);
    let model = models::build(&spec).map_err(|e| e.to_string())?;
    let q = vec![0.1; model.dim()];
    let mut gradient = vec![0.0; q.len()];
    let mut sink = 0.0;
    let mut time = |body: &mut dyn FnMut() -> f64| {
        for _ in 0..calls / 10 + 1 {
            sink += body();
        }
        let start = Instant::now();
        for _ in 0..calls {
            sink += body();
        }
        start.elapsed().as_nanos() as f64 / f64::from(calls)
    };
    let gradient_ns = time(&mut || model.value_and_gradient(&q, &mut gradient));
    let value_ns = time(&mut || model.value(&q));
    println!("shmc_ns_per_gradient {gradient_ns:.1}");
    println!("shmc_ns_per_value {value_ns:.1}");
    println!("checksum {sink}");
    Ok(())
}
