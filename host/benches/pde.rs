//! The cost of the elliptic PDE model on the papers' 30×30 mesh with 20 Karhunen–Loève modes:
//! one forward solve split into its parts (assembly, numeric sparse Cholesky, the triangular
//! solves), then `U` and `U + ∇U` as the sampler calls them.
//!
//! Before criterion's own timing, the bench prints the best of many runs of each part and its
//! share of a forward solve, so that the split is read off one run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common::best_of;
use shmc::core::Potential;
use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::pde::Mesh;

fn pde(c: &mut Criterion) {
    let model = EllipticPde::simulate(PdeSettings::default()).expect("the paper's model builds");
    let theta = model.truth().to_vec();
    let mut grad = vec![0.0; theta.len()];
    let mesh = Mesh::new(EllipticPde::PAPER_MESH).expect("30×30 mesh");
    // A coefficient with the variation of a prior draw.
    let coefficient: Vec<f64> = mesh
        .quadrature_points()
        .iter()
        .map(|[x, y]| (0.5 * (6.0 * x).sin() * (4.0 * y).cos()).exp())
        .collect();
    let mut ws = mesh.workspace(1);
    let mut u = vec![0.0; mesh.nodes()];

    let reps = 2000;
    let assemble = best_of(reps, || mesh.assemble(black_box(&coefficient), &mut ws));
    let factor = best_of(reps, || {
        mesh.assemble(black_box(&coefficient), &mut ws);
        mesh.factorize(&mut ws).expect("positive definite");
    });
    let solve = best_of(reps, || {
        mesh.solve(black_box(&coefficient), &mut ws, &mut u)
            .expect("positive definite")
    });
    let value = best_of(reps, || {
        black_box(model.value(black_box(&theta)));
    });
    let gradient = best_of(reps, || {
        black_box(model.value_and_gradient(black_box(&theta), &mut grad));
    });
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let share = |d: Duration| 100.0 * d.as_secs_f64() / solve.as_secs_f64();
    println!(
        "30×30 mesh, {} unknowns, d = {} (best of {reps}):",
        mesh.unknowns(),
        theta.len()
    );
    println!(
        "  forward solve {:.1} µs = assembly {:.1} µs ({:.0}%) + factorization {:.1} µs ({:.0}%) + triangular solves and expansion {:.1} µs ({:.0}%)",
        us(solve),
        us(assemble),
        share(assemble),
        us(factor - assemble),
        share(factor - assemble),
        us(solve.saturating_sub(factor)),
        share(solve.saturating_sub(factor)),
    );
    println!(
        "  U {:.1} µs (coefficient, solve, misfit); U + ∇U {:.1} µs (adds the adjoint solve and the contraction with the modes)",
        us(value),
        us(gradient)
    );

    let mut group = c.benchmark_group("elliptic_pde");
    group.bench_function("assembly", |b| {
        b.iter(|| mesh.assemble(black_box(&coefficient), &mut ws))
    });
    group.bench_function("forward_solve", |b| {
        b.iter(|| mesh.solve(black_box(&coefficient), &mut ws, &mut u))
    });
    group.bench_function("value", |b| b.iter(|| model.value(black_box(&theta))));
    group.bench_function("value_and_gradient", |b| {
        b.iter(|| model.value_and_gradient(black_box(&theta), &mut grad))
    });
    group.finish();
}

criterion_group!(benches, pde);
criterion_main!(benches);
