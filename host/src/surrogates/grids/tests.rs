//! Tests of the domain, the force grid, the sparse grid, the hybrid potential and grid files.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use shmc_core::Potential;

use super::*;
use crate::models::gaussian::ConjugateGaussian;
use crate::optimize::{MapEstimate, MapOptions, find_map};
use crate::surrogates::file::SurrogateFile;
use crate::surrogates::{Fallback, Held, Shared, Surrogate, SurrogateMeta, kinds};

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// A uniform random point of `domain`.
fn point_in(domain: &Domain, rng: &mut Pcg64) -> Vec<f64> {
    (0..domain.dim())
        .map(|k| domain.lower()[k] + rng.random::<f64>() * domain.width(k))
        .collect()
}

/// A potential known only by its value: all a sparse grid asks for (its gradient is NaN, so a
/// grid that asked would fail loudly).
struct Values<F> {
    dim: usize,
    f: F,
}

impl<F: Fn(&[f64]) -> f64> Potential for Values<F> {
    fn dim(&self) -> usize {
        self.dim
    }
    fn value(&self, q: &[f64]) -> f64 {
        (self.f)(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(f64::NAN);
        (self.f)(q)
    }
}

/// `U(q) = q₀² + ½ q₁² + sin(q₀ q₁)`, with its exact gradient.
struct Wavy;

impl Potential for Wavy {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        q[0] * q[0] + 0.5 * q[1] * q[1] + (q[0] * q[1]).sin()
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let c = (q[0] * q[1]).cos();
        grad[0] = 2.0 * q[0] + q[1] * c;
        grad[1] = q[1] + q[0] * c;
        self.value(q)
    }
}

/// Counts every call into the potential it wraps.
struct Counted<P> {
    inner: P,
    calls: AtomicU64,
}

impl<P> Counted<P> {
    fn new(inner: P) -> Self {
        Self {
            inner,
            calls: AtomicU64::new(0),
        }
    }
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl<P: Potential> Potential for Counted<P> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn value(&self, q: &[f64]) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.value(q)
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.value_and_gradient(q, grad)
    }
}

/// `exp(−‖x − ½‖²)`: smooth, with non-zero mixed derivatives of every order.
fn bump(x: &[f64]) -> f64 {
    (-x.iter().map(|v| (v - 0.5) * (v - 0.5)).sum::<f64>()).exp()
}

fn unit_box(d: usize) -> Domain {
    Domain::new(vec![0.0; d], vec![1.0; d]).unwrap()
}

/// The largest `|Ũ − f|` over `points`.
fn max_error(grid: &SparseGrid, f: impl Fn(&[f64]) -> f64, points: &[Vec<f64>]) -> f64 {
    points
        .iter()
        .map(|p| (grid.value(p) - f(p)).abs())
        .fold(0.0, f64::max)
}

/// A file path in the temporary folder, unique to this process and `name`.
fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("shmc-grids-{}-{name}.json", std::process::id()))
}

const GIB: u64 = 1 << 30;

// ---------------------------------------------------------------------------------------------
// Domain

#[test]
fn domain_rejects_empty_reversed_and_non_finite_bounds() {
    assert!(Domain::new(vec![], vec![]).is_err());
    assert!(Domain::new(vec![0.0], vec![1.0, 2.0]).is_err());
    let error = Domain::new(vec![0.0, 1.0], vec![1.0, 1.0]).unwrap_err();
    assert!(error.to_string().contains("coordinate 1"), "{error}");
    let error = Domain::new(vec![f64::NAN], vec![1.0]).unwrap_err();
    assert!(error.to_string().contains("finite"), "{error}");
    assert!(Domain::new(vec![0.0], vec![f64::INFINITY]).is_err());
}

#[test]
fn domain_contains_its_closed_box_only() {
    let domain = Domain::new(vec![-1.0, 0.0], vec![1.0, 2.0]).unwrap();
    assert!(domain.contains(&[-1.0, 2.0]));
    assert!(domain.contains(&[0.3, 1.0]));
    assert!(!domain.contains(&[1.0 + 1e-12, 1.0]));
    assert!(!domain.contains(&[0.0, -1e-300]));
    assert!(!domain.contains(&[0.0, f64::NAN]));
    assert!(!domain.contains(&[0.0]));
}

#[test]
fn domain_parsing_errors_name_the_bad_entry() {
    let cases = [
        ("0:1, 2:x ,3:4", "entry 2 \"2:x\"", "not a number"),
        ("0:1,5", "entry 2 \"5\"", "lo:hi"),
        ("1:0", "entry 1 \"1:0\"", "below"),
        ("0:1,2:3,-inf:0", "entry 3 \"-inf:0\"", "finite"),
        ("0:1,,2:3", "entry 2 \"\"", "lo:hi"),
        ("0:1:2", "entry 1 \"0:1:2\"", "not a number"),
    ];
    for (text, entry, why) in cases {
        let message = Domain::parse(text).unwrap_err().to_string();
        assert!(message.contains(entry), "{text:?}: {message}");
        assert!(message.contains(why), "{text:?}: {message}");
        assert!(!message.contains('\n'), "{text:?}: {message}");
    }
    assert!(
        Domain::parse("  ")
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
    // Finite bounds whose width is not: every grid divides by it.
    let message = Domain::parse("0:1,-1e308:1e308").unwrap_err().to_string();
    assert!(
        message.contains("domain coordinate 1: the width from -1e308 to 1e308 overflows"),
        "{message}"
    );
}

#[test]
fn domain_text_round_trips_bit_for_bit() {
    let domain: Domain = " -3 : 0.5, -0.5:3 ".parse().unwrap();
    assert_eq!(domain.lower(), &[-3.0, -0.5]);
    assert_eq!(domain.upper(), &[0.5, 3.0]);
    let odd = Domain::new(vec![0.1 + 0.2, -1e-300], vec![1.0 / 3.0, 7e22]).unwrap();
    let back = Domain::parse(&odd.to_string()).unwrap();
    for (a, b) in odd
        .lower()
        .iter()
        .chain(odd.upper())
        .zip(back.lower().iter().chain(back.upper()))
    {
        assert_eq!(a.to_bits(), b.to_bits());
    }
}

#[test]
fn bounding_box_covers_the_states_with_the_margin() {
    let states = vec![vec![0.0, 5.0], vec![2.0, 1.0], vec![1.0, 3.0]];
    let tight = Domain::bounding_box(&states, 0.0).unwrap();
    assert_eq!(tight.lower(), &[0.0, 1.0]);
    assert_eq!(tight.upper(), &[2.0, 5.0]);
    assert!(states.iter().all(|s| tight.contains(s)));
    // 10 % of each extent (2 and 4) on both sides.
    let wide = Domain::bounding_box(&states, 0.1).unwrap();
    assert_eq!(wide.lower(), &[-0.2, 0.6]);
    assert_eq!(wide.upper(), &[2.2, 5.4]);

    let flat = vec![vec![0.0, 1.0], vec![2.0, 1.0]];
    let error = Domain::bounding_box(&flat, 0.5).unwrap_err();
    assert!(error.to_string().contains("coordinate 1"), "{error}");
    assert!(Domain::bounding_box(Vec::<Vec<f64>>::new(), 0.1).is_err());
    assert!(Domain::bounding_box(&states, -0.1).is_err());
    let ragged = vec![vec![0.0, 1.0], vec![2.0]];
    assert!(Domain::bounding_box(&ragged, 0.0).is_err());
    let nan = vec![vec![0.0, 1.0], vec![2.0, f64::NAN]];
    assert!(Domain::bounding_box(&nan, 0.0).is_err());
}

/// `P(a ≤ Z ≤ b)` for a standard normal `Z`, by composite Simpson on 20 000 intervals: the
/// error is below `(b − a)⁵ max|φ⁗| / (180 n⁴) < 1e-15` for `b − a < 10`, so this is the exact
/// CDF for the test's purposes, computed without the quantile function under test.
fn normal_probability(a: f64, b: f64) -> f64 {
    let density = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let n = 20_000;
    let h = (b - a) / n as f64;
    let inner: f64 = (1..n)
        .map(|i| density(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (density(a) + inner + density(b)) * h / 3.0
}

#[test]
fn laplace_domain_holds_the_stated_per_coordinate_probability() {
    // Correlation 0.8 in the data covariance, so the posterior is tilted and the marginal
    // standard deviation √((H⁻¹)ᵢᵢ) is far from 1/√Hᵢᵢ (a box from the diagonal of H would be
    // about 0.6 times too narrow and fail this test).
    let model = ConjugateGaussian::simulate(100, 3).unwrap();
    let (ninety, map) = Domain::laplace(&model, &[0.0, 0.0], 0.9).unwrap();
    assert!(map.evaluations > 0);
    assert_eq!(ninety, Domain::from_laplace(&map, 0.9).unwrap());
    let mean = model.posterior_mean();
    let covariance = model.posterior_covariance();
    for p in [0.5, 0.9, 0.99] {
        let domain = Domain::from_laplace(&map, p).unwrap();
        for i in 0..2 {
            let sd = covariance[(i, i)].sqrt();
            let a = (domain.lower()[i] - mean[i]) / sd;
            let b = (domain.upper()[i] - mean[i]) / sd;
            let probability = normal_probability(a, b);
            // U is quadratic: the MAP is exact up to the search's gradient tolerance (1e-8
            // relative) and the central-difference Hessian of a linear gradient is exact up to
            // rounding, so the box's ends are right to about 1e-7 standard deviations, which
            // moves the probability by less than 1e-7.
            assert!(
                (probability - p).abs() < 1e-6,
                "p = {p}, coordinate {i}: the box holds {probability}"
            );
        }
    }
}

#[test]
fn laplace_domain_refuses_bad_input() {
    let model = ConjugateGaussian::simulate(100, 3).unwrap();
    let map = find_map(&model, &[0.0, 0.0], &MapOptions::default()).unwrap();
    for p in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(Domain::from_laplace(&map, p).is_err(), "p = {p}");
    }
    let unconverged = MapEstimate {
        converged: false,
        termination: "ran out of iterations".into(),
        ..map.clone()
    };
    let error = Domain::from_laplace(&unconverged, 0.9).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the MAP search stopped short of its gradient tolerance"),
        "{error}"
    );
    let indefinite = nalgebra::DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
    assert!(Domain::from_gaussian(&[0.0, 0.0], &indefinite, 0.9).is_err());
}

// ---------------------------------------------------------------------------------------------
// Force grid

#[test]
fn force_grid_returns_the_centre_value_of_the_cell_holding_a_point() {
    let (lower, upper, h) = ([-1.0, 0.0], [1.0, 2.0], 0.25);
    let domain = Domain::new(lower.to_vec(), upper.to_vec()).unwrap();
    let grid = ForceGrid::build(&Wavy, domain, h, Interpolation::Constant, GIB).unwrap();
    assert_eq!(grid.cells(), &[8, 8]);
    assert_eq!(grid.precomputation().evaluations, 64);

    let mut r = rng(1);
    let mut points: Vec<Vec<f64>> = (0..500)
        .map(|_| {
            (0..2)
                .map(|k| lower[k] + r.random::<f64>() * (upper[k] - lower[k]))
                .collect()
        })
        .collect();
    // The corners and a cell face: the upper faces belong to the last cell, others to the cell
    // above.
    points.extend([vec![-1.0, 0.0], vec![1.0, 2.0], vec![-0.5, 1.0]]);
    let (mut grad, mut exact) = ([0.0; 2], [0.0; 2]);
    for q in &points {
        let centre: Vec<f64> = (0..2)
            .map(|k| {
                let i = (((q[k] - lower[k]) / h).floor()).min(7.0);
                lower[k] + (i + 0.5) * h
            })
            .collect();
        let u = Wavy.value_and_gradient(&centre, &mut exact);
        assert!((grid.value(q) - u).abs() <= 1e-12, "{q:?}");
        let v = grid.value_and_gradient(q, &mut grad);
        assert_eq!(v.to_bits(), grid.value(q).to_bits());
        for k in 0..2 {
            assert!((grad[k] - exact[k]).abs() <= 1e-12, "{q:?}");
        }
    }
    // Outside: nothing. The `try_` forms say so and leave the gradient alone.
    let outside = [1.5, 1.0];
    assert_eq!(grid.try_value(&outside), None);
    grad = [7.0; 2];
    assert_eq!(grid.try_value_and_gradient(&outside, &mut grad), None);
    assert!(grid.try_value_and_gradient(&outside, &mut grad).is_none());
    assert_eq!(grad, [7.0; 2]);
    assert!(grid.value(&outside).is_nan());
    grid.gradient(&outside, &mut grad);
    assert!(grad.iter().all(|g| g.is_nan()));
}

/// `U(q) = Σₖ (k + 1) qₖ² + q₀ q_{d−1}` in any dimension, with its exact gradient: every
/// coordinate of every cell centre gets its own gradient entry.
struct Bowl(usize);

impl Potential for Bowl {
    fn dim(&self) -> usize {
        self.0
    }
    fn value(&self, q: &[f64]) -> f64 {
        let squares: f64 = q
            .iter()
            .enumerate()
            .map(|(k, x)| (k + 1) as f64 * x * x)
            .sum();
        squares + q[0] * q[self.0 - 1]
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.0;
        for (k, g) in grad.iter_mut().enumerate() {
            *g = 2.0 * (k + 1) as f64 * q[k];
        }
        grad[0] += q[d - 1];
        grad[d - 1] += q[0];
        self.value(q)
    }
}

/// Points to look up in a grid over `domain` (seeded by `seed`): 300 inside, and per
/// coordinate one on each face, one an ulp past each, NaN and both infinities, then the box's
/// two extreme corners, a point of one coordinate more and an empty one.
fn lookup_probes(domain: &Domain, seed: u64) -> Vec<Vec<f64>> {
    let (lower, upper) = (domain.lower(), domain.upper());
    let mut r = rng(seed);
    let mut points: Vec<Vec<f64>> = (0..300).map(|_| point_in(domain, &mut r)).collect();
    for k in 0..domain.dim() {
        for x in [
            lower[k],
            upper[k],
            lower[k].next_down(),
            upper[k].next_up(),
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let mut q = point_in(domain, &mut r);
            q[k] = x;
            points.push(q);
        }
    }
    points.extend([
        lower.to_vec(),
        upper.to_vec(),
        vec![0.0; domain.dim() + 1],
        Vec::new(),
    ]);
    points
}

/// That the lookups of [`lookup_probes`] in `d` coordinates found `inside` and `outside` the
/// box as many as it holds of each.
fn assert_probes_counted(d: usize, inside: usize, outside: usize) {
    assert!(
        inside == 302 + 2 * d && outside == 5 * d + 2,
        "{inside}, {outside}"
    );
}

/// The one-pass lookups (`*_within`, which a sampler's [`Fallback`] asks every leapfrog step)
/// agree bit for bit with a reference written from the definition: inside the box (faces and
/// corners included), `U` and `∇U` at the centre of the cell `⌊(q − l)/w⌋` (the upper face in
/// the last cell); outside, or for a NaN coordinate or a point of another dimension, nothing,
/// with the gradient untouched. In dimensions 1 to 5: the lookup copies up to 4 gradient
/// entries by register moves and more by a slice copy.
#[test]
fn force_grid_one_pass_lookups_match_the_definition_in_every_dimension() {
    for d in 1..=5 {
        let lower: Vec<f64> = (0..d).map(|k| -1.0 - 0.25 * k as f64).collect();
        let upper: Vec<f64> = (0..d).map(|k| 0.5 + 0.5 * k as f64).collect();
        let domain = Domain::new(lower.clone(), upper.clone()).unwrap();
        let grid =
            ForceGrid::build(&Bowl(d), domain.clone(), 0.3, Interpolation::Constant, GIB).unwrap();
        let (cells, widths) = (grid.cells().to_vec(), grid.widths().to_vec());
        let reference = |q: &[f64]| -> Option<(f64, Vec<f64>)> {
            if !domain.contains(q) {
                return None;
            }
            let centre: Vec<f64> = (0..d)
                .map(|k| {
                    let i = ((q[k] - lower[k]) * (1.0 / widths[k])).floor() as usize;
                    lower[k] + (i.min(cells[k] - 1) as f64 + 0.5) * widths[k]
                })
                .collect();
            let mut gradient = vec![0.0; d];
            let value = Bowl(d).value_and_gradient(&centre, &mut gradient);
            Some((value, gradient))
        };
        let points = lookup_probes(&domain, d as u64);
        let (mut inside, mut outside) = (0, 0);
        for q in &points {
            let mut grad = vec![7.0; q.len()];
            let expected = if q.len() == d { reference(q) } else { None };
            let bits = |v: Option<f64>| v.map(f64::to_bits);
            assert_eq!(
                bits(grid.value_within(q)),
                bits(expected.as_ref().map(|e| e.0))
            );
            let value = grid.value_and_gradient_within(q, &mut grad);
            assert_eq!(bits(value), bits(expected.as_ref().map(|e| e.0)), "{q:?}");
            let untouched = vec![7.0; q.len()];
            let wanted = expected.as_ref().map_or(&untouched, |e| &e.1);
            assert_eq!(&grad, wanted, "d = {d}, q = {q:?}");
            grad.fill(7.0);
            assert_eq!(grid.gradient_within(q, &mut grad), expected.is_some());
            assert_eq!(&grad, wanted, "d = {d}, q = {q:?}");
            if expected.is_some() {
                inside += 1;
            } else {
                outside += 1;
            }
        }
        assert_probes_counted(d, inside, outside);
    }
}

#[test]
fn force_grid_cell_counts_round_to_the_box() {
    /// `U(q) = q`: finite everywhere, with a finite gradient.
    struct Slope;
    impl Potential for Slope {
        fn dim(&self) -> usize {
            1
        }
        fn value(&self, q: &[f64]) -> f64 {
            q[0]
        }
        fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
            grad[0] = 1.0;
            q[0]
        }
    }
    let one = Slope;
    let cells = |lo: f64, hi: f64, h: f64| {
        let grid = ForceGrid::build(
            &one,
            Domain::new(vec![lo], vec![hi]).unwrap(),
            h,
            Interpolation::Constant,
            GIB,
        );
        grid.unwrap().cells()[0]
    };
    // 1/0.1 and 3.5/0.1 are a hair off 10 and 35 in floating point; the slack takes the integer.
    assert_eq!(cells(0.0, 1.0, 0.1), 10);
    assert_eq!(cells(0.0, 3.5, 0.1), 35);
    assert_eq!(cells(-0.3, 0.4, 0.1), 7);
    // Not a whole number of cells: round up and shrink the cells to fit.
    assert_eq!(cells(0.0, 1.0, 0.3), 4);
    assert_eq!(cells(0.0, 1.0, 5.0), 1);
    let grid = ForceGrid::build(&one, unit_box(1), 0.3, Interpolation::Constant, GIB).unwrap();
    assert_eq!(grid.widths(), &[0.25]);
    assert!(ForceGrid::build(&one, unit_box(1), 0.0, Interpolation::Constant, GIB).is_err());
    assert!(ForceGrid::build(&one, unit_box(2), 0.1, Interpolation::Constant, GIB).is_err());
}

#[test]
fn force_grid_over_the_memory_limit_is_refused_before_any_evaluation() {
    // d = 10, h = 0.01 on [0, 1]¹⁰: 100¹⁰ cells of 11 floats. That count overflows 64 bits, so
    // an attempt to allocate it would abort the test rather than fail it.
    let ten = Counted::new(Values {
        dim: 10,
        f: |_: &[f64]| 0.0,
    });
    let bytes = 100u128.pow(10) * 11 * 8;
    let error =
        ForceGrid::build(&ten, unit_box(10), 0.01, Interpolation::Constant, GIB).unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&format!("{bytes} bytes")), "{message}");
    assert!(message.contains(&format!("{GIB} bytes")), "{message}");
    assert_eq!(ten.calls(), 0);

    // At the boundary: 64 × 64 cells of 3 floats, read at their centres or at their 65 × 65
    // corners.
    for (interpolation, points, what) in [
        (Interpolation::Constant, 64 * 64, "4096 cell centres"),
        (Interpolation::Multilinear, 65 * 65, "4225 cell corners"),
    ] {
        let two = Counted::new(Wavy);
        let bytes = points * 3 * 8;
        let build = |limit| ForceGrid::build(&two, unit_box(2), 1.0 / 64.0, interpolation, limit);
        let error = build(bytes - 1).unwrap_err().to_string();
        assert!(error.contains(&format!("{bytes} bytes")), "{error}");
        assert!(error.contains(what), "{error}");
        assert_eq!(two.calls(), 0);
        let grid = build(bytes).unwrap();
        assert_eq!(grid.bytes() as u64, bytes);
        assert_eq!(two.calls(), points);
    }
}

#[test]
fn grids_refuse_a_domain_where_the_model_is_not_finite() {
    let log = Values {
        dim: 1,
        f: |q: &[f64]| -q[0].ln(),
    };
    let domain = Domain::new(vec![-1.0], vec![1.0]).unwrap();
    let error =
        ForceGrid::build(&log, domain.clone(), 0.5, Interpolation::Constant, GIB).unwrap_err();
    assert!(error.to_string().contains("not finite"), "{error}");
    let error = SparseGrid::regular(&log, domain, 2, GIB).unwrap_err();
    assert!(error.to_string().contains("not finite"), "{error}");
}

#[test]
fn fallback_uses_the_grid_inside_and_the_exact_potential_outside() {
    let domain = Domain::new(vec![-1.0, -0.5], vec![1.5, 2.0]).unwrap();
    let force = ForceGrid::build(&Wavy, domain.clone(), 0.1, Interpolation::Constant, GIB).unwrap();
    let sparse = SparseGrid::regular(&Wavy, domain.clone(), 6, GIB).unwrap();
    let check = |reference: std::sync::Arc<dyn Surrogate>, behind_shared: bool| {
        let held = match behind_shared {
            true => Held::Own(Box::new(Shared(reference.clone()))),
            false => Held::Shared(reference.clone()),
        };
        let fallback = Fallback::new(held, &Wavy);
        assert_eq!(fallback.dim(), 2);
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        let mut r = rng(2);
        for _ in 0..200 {
            // Points in a box twice the domain's size: about a quarter inside.
            let q: Vec<f64> = (0..2)
                .map(|k| domain.lower()[k] + (2.0 * r.random::<f64>() - 0.5) * domain.width(k))
                .collect();
            let (value, expected) = if domain.contains(&q) {
                assert!(reference.contains(&q));
                (reference.value_and_gradient(&q, &mut b), b)
            } else {
                assert!(!reference.contains(&q));
                assert!(reference.value(&q).is_nan());
                (Wavy.value_and_gradient(&q, &mut b), b)
            };
            assert_eq!(
                fallback.value_and_gradient(&q, &mut a).to_bits(),
                value.to_bits()
            );
            assert_eq!(a.map(f64::to_bits), expected.map(f64::to_bits));
            fallback.gradient(&q, &mut a);
            assert_eq!(a.map(f64::to_bits), expected.map(f64::to_bits));
            assert_eq!(fallback.value(&q).to_bits(), value.to_bits());
        }
        // Just outside the upper corner: the exact gradient, not the last cell's.
        let q = [1.5 + 1e-9, 2.0];
        fallback.gradient(&q, &mut a);
        Wavy.gradient(&q, &mut b);
        assert_eq!(a, b);
    };
    let (force, sparse) = (std::sync::Arc::new(force), std::sync::Arc::new(sparse));
    for behind_shared in [false, true] {
        check(force.clone(), behind_shared);
        check(sparse.clone(), behind_shared);
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse grid

/// The number of distinct points of the Clenshaw–Curtis sparse grid `H_{q,d}` with `q = k + d`,
/// straight from the paper's eq. 3.9: the union over `q − d + 1 ≤ |i| ≤ q` (levels from 1) of the
/// full tensor grids `X^{i₁} × … × X^{i_d}`, `X^i` the `mᵢ` points `(j − 1)/(mᵢ − 1)` (`½` when
/// `mᵢ = 1`), `m₁ = 1`, `mᵢ = 2^(i−1) + 1`. Points are kept as integers over `2^(k+1)`, exact.
fn paper_point_count(d: usize, k: usize) -> usize {
    let q = k + d;
    let denominator = 1u64 << (k + 1);
    let nodes = |i: usize| -> Vec<u64> {
        let m = if i == 1 { 1 } else { (1u64 << (i - 1)) + 1 };
        if m == 1 {
            vec![denominator / 2]
        } else {
            (0..m).map(|j| j * denominator / (m - 1)).collect()
        }
    };
    let mut points = HashSet::new();
    let mut levels = vec![1usize; d];
    loop {
        let sum: usize = levels.iter().sum();
        if sum + d > q && sum <= q {
            // The tensor grid of these levels.
            let sets: Vec<Vec<u64>> = levels.iter().map(|&i| nodes(i)).collect();
            let mut index = vec![0usize; d];
            loop {
                points.insert((0..d).map(|m| sets[m][index[m]]).collect::<Vec<_>>());
                let mut m = 0;
                while m < d {
                    index[m] += 1;
                    if index[m] < sets[m].len() {
                        break;
                    }
                    index[m] = 0;
                    m += 1;
                }
                if m == d {
                    break;
                }
            }
        }
        // Next level multi-index in {1, …, k + 1}ᵈ.
        let mut m = 0;
        while m < d {
            levels[m] += 1;
            if levels[m] <= k + 1 {
                break;
            }
            levels[m] = 1;
            m += 1;
        }
        if m == d {
            return points.len();
        }
    }
}

#[test]
fn sparse_grid_point_counts_follow_clenshaw_curtis() {
    let zero = Values {
        dim: 2,
        f: |_: &[f64]| 0.0,
    };
    let published = [1, 5, 13, 29, 65, 145];
    for (k, &count) in published.iter().enumerate() {
        let grid = SparseGrid::regular(&zero, unit_box(2), k as u8, GIB).unwrap();
        assert_eq!(grid.len(), count, "d = 2, level {k}");
        assert_eq!(paper_point_count(2, k), count, "d = 2, level {k}");
        assert_eq!(SparseGrid::regular_points(2, k as u8), Some(count as u128));
        assert_eq!(grid.points_per_level().iter().sum::<usize>(), count);
    }
    let zero = Values {
        dim: 3,
        f: |_: &[f64]| 0.0,
    };
    for k in 0..=5 {
        let grid = SparseGrid::regular(&zero, unit_box(3), k as u8, GIB).unwrap();
        let expected = paper_point_count(3, k);
        assert_eq!(grid.len(), expected, "d = 3, level {k}");
        assert_eq!(
            SparseGrid::regular_points(3, k as u8),
            Some(expected as u128)
        );
        assert_eq!(grid.precomputation().evaluations, expected as u64);
    }
    // Points per level sum for d = 2, level 2: |l| = 1 is (1,0) and (0,1), two points each;
    // |l| = 2 is (2,0), (1,1) and (0,2), with 2 + 4 + 2.
    let grid = SparseGrid::regular(
        &Values {
            dim: 2,
            f: |_: &[f64]| 0.0,
        },
        unit_box(2),
        2,
        GIB,
    )
    .unwrap();
    assert_eq!(grid.points_per_level(), vec![1, 4, 8]);
}

#[test]
fn sparse_grid_interpolates_multilinear_functions_exactly() {
    // f(q) = Σ_S c_S Π_{k∈S} qₖ over the subsets S of {0, 1, 2}: multilinear in q, hence in the
    // unit coordinates, so the subspaces with every level ≤ 1 (present from level 3 on) hold it
    // exactly.
    let mut r = rng(5);
    let mut c: Vec<f64> = (0..8).map(|_| 4.0 * r.random::<f64>() - 2.0).collect();
    c[7] = 1.5; // the q₀q₁q₂ term, which level 2 misses
    let f = move |q: &[f64]| {
        (0..8usize)
            .map(|s| {
                c[s] * (0..3)
                    .filter(|k| s >> k & 1 == 1)
                    .map(|k| q[k])
                    .product::<f64>()
            })
            .sum::<f64>()
    };
    let potential = Values {
        dim: 3,
        f: f.clone(),
    };
    let domain = Domain::new(vec![-1.0, 0.5, -3.0], vec![2.0, 1.5, -1.0]).unwrap();
    let points: Vec<Vec<f64>> = (0..1000).map(|_| point_in(&domain, &mut r)).collect();
    let scale = points.iter().map(|p| f(p).abs()).fold(1.0, f64::max);
    for level in [3, 5] {
        let grid = SparseGrid::regular(&potential, domain.clone(), level, GIB).unwrap();
        let error = max_error(&grid, &f, &points);
        assert!(error <= 1e-12 * scale, "level {level}: error {error:e}");
    }
    let options = AdaptiveOptions {
        tolerance: 1e-10,
        ..AdaptiveOptions::default()
    };
    let adaptive = SparseGrid::adaptive(&potential, domain.clone(), &options, GIB).unwrap();
    assert!(max_error(&adaptive, &f, &points) <= 1e-12 * scale);
    let coarse = SparseGrid::regular(&potential, domain, 2, GIB).unwrap();
    assert!(max_error(&coarse, &f, &points) > 1e-3);
}

#[test]
fn sparse_grid_error_falls_about_fourfold_per_level() {
    // Piecewise-linear sparse grids of level n have ‖f − f_n‖∞ ≤ C 2^(−2n) n^(d−1) for f with
    // bounded mixed second derivatives (Bungartz and Griebel, Acta Numerica 2004, section 3):
    // fourfold per level up to the log factor. So e_k 4^k / k² (d = 3) must stay bounded; C is
    // taken at level 3, with 25 % slack because each e_k is a maximum over 4000 random points,
    // not the true supremum. An error merely halving per level would grow that ratio 4.5-fold
    // from level 3 to 8 and fail.
    let f = bump;
    let potential = Values { dim: 3, f };
    let mut r = rng(7);
    let points: Vec<Vec<f64>> = (0..4000).map(|_| point_in(&unit_box(3), &mut r)).collect();
    let errors: Vec<f64> = (0..=8)
        .map(|k| {
            let grid = SparseGrid::regular(&potential, unit_box(3), k, GIB).unwrap();
            let error = max_error(&grid, f, &points);
            // The estimate assumes refinements shrink at least twofold, checked below.
            assert!(
                grid.error_estimate() >= error,
                "level {k}: estimate {:e} below the measured {error:e}",
                grid.error_estimate()
            );
            assert_eq!(grid.kl_bound_estimate(), 2.0 * grid.error_estimate());
            error
        })
        .collect();
    let normalized = |k: usize| errors[k] * 4f64.powi(k as i32) / (k * k) as f64;
    for k in 3..=8 {
        assert!(
            normalized(k) <= 1.25 * normalized(3),
            "level {k}: e·4^k/k² = {:.3e}, level 3 had {:.3e} (errors {errors:?})",
            normalized(k),
            normalized(3)
        );
    }
    // From level 3 on, 4 (k/(k+1))² ≥ 2.25: at least a halving per level.
    for k in 3..8 {
        assert!(errors[k + 1] <= errors[k] / 2.0, "errors {errors:?}");
    }
}

#[test]
fn sparse_grid_gradient_matches_finite_differences_away_from_kinks() {
    let f = |q: &[f64]| {
        (-(q[0] * q[0] + q[1] * q[1] + q[2] * q[2]) / 4.0).exp() * (1.0 + q[0].sin()) + q[1] * q[2]
    };
    let domain = Domain::new(vec![-1.0, 0.0, -2.0], vec![2.0, 1.0, 2.0]).unwrap();
    let grid = SparseGrid::regular(&Values { dim: 3, f }, domain.clone(), 5, GIB).unwrap();
    // Kinks lie where a unit coordinate is a multiple of 2⁻⁵; keep 1e-4 away from them, far more
    // than the step. Between kinks Ũ is linear along each axis, so a central difference is exact
    // up to rounding, about ε|Ũ|/δ ≈ 1e-9 here.
    let delta_unit = 1e-6;
    let mut r = rng(11);
    let mut grad = [0.0; 3];
    let mut checked = 0;
    while checked < 300 {
        let q = point_in(&domain, &mut r);
        let near_kink = (0..3).any(|k| {
            let t = (q[k] - domain.lower()[k]) / domain.width(k) * 32.0;
            (t - t.round()).abs() < 32.0 * 1e-4
        });
        if near_kink {
            continue;
        }
        checked += 1;
        grid.gradient(&q, &mut grad);
        for k in 0..3 {
            let step = delta_unit * domain.width(k);
            let (mut up, mut down) = (q.clone(), q.clone());
            up[k] += step;
            down[k] -= step;
            let difference = (grid.value(&up) - grid.value(&down)) / (2.0 * step);
            assert!(
                (grad[k] - difference).abs() <= 1e-7 * (1.0 + grad[k].abs()),
                "∂{k} at {q:?}: {} vs {difference}",
                grad[k]
            );
        }
    }
}

#[test]
fn sparse_grid_gradient_at_a_kink_is_the_slope_from_above() {
    // A box of width 2 in coordinate 0, so q₀ = 0 maps to the unit coordinate ½ exactly (a kink
    // of every level ≥ 1), and q₀ = 1 to the upper face.
    let f = |q: &[f64]| (q[0] + 0.3 * q[1]).exp() + q[0] * q[0] * q[1];
    let domain = Domain::new(vec![-1.0, 0.0], vec![1.0, 1.0]).unwrap();
    let grid = SparseGrid::regular(&Values { dim: 2, f }, domain, 4, GIB).unwrap();
    let h = 1e-7;
    let slopes = |q: [f64; 2]| {
        let value = grid.value(&q);
        let above = (grid.value(&[q[0] + h, q[1]]) - value) / h;
        let below = (value - grid.value(&[q[0] - h, q[1]])) / h;
        (above, below)
    };
    let mut grad = [0.0; 2];
    let q = [0.0, 0.3];
    grid.gradient(&q, &mut grad);
    let (above, below) = slopes(q);
    // A real kink: the two one-sided slopes differ by far more than the tolerance.
    assert!((above - below).abs() > 1e-3, "{above} vs {below}");
    assert!((grad[0] - above).abs() <= 1e-6, "{} vs {above}", grad[0]);
    // On the upper face only the slope from below exists.
    let q = [1.0, 0.3];
    grid.gradient(&q, &mut grad);
    let (_, below) = slopes(q);
    assert!((grad[0] - below).abs() <= 1e-6, "{} vs {below}", grad[0]);
}

#[test]
fn adaptive_refinement_beats_the_regular_grid_on_an_anisotropic_function() {
    // The third coordinate barely matters.
    let f = |x: &[f64]| {
        (-3.0 * (x[0] - 0.4).powi(2) - 3.0 * (x[1] - 0.55).powi(2) - 0.05 * (x[2] - 0.5).powi(2))
            .exp()
    };
    let potential = Values { dim: 3, f };
    let options = AdaptiveOptions {
        tolerance: 1e-4,
        max_points: 100_000,
        ..AdaptiveOptions::default()
    };
    let adaptive = SparseGrid::adaptive(&potential, unit_box(3), &options, GIB).unwrap();
    match adaptive.construction() {
        Construction::Adaptive { stop, .. } => assert_eq!(*stop, AdaptiveStop::Tolerance),
        other => panic!("{other:?}"),
    }
    assert!(adaptive.largest_surplus() < 1e-4);
    assert_eq!(
        adaptive.points_per_level().iter().sum::<usize>(),
        adaptive.len()
    );
    let mut r = rng(13);
    let points: Vec<Vec<f64>> = (0..4000).map(|_| point_in(&unit_box(3), &mut r)).collect();
    let adaptive_error = max_error(&adaptive, f, &points);
    // The coarsest regular grid at least as accurate.
    let (level, regular) = (0..=12)
        .map(|k| {
            (
                k,
                SparseGrid::regular(&potential, unit_box(3), k, GIB).unwrap(),
            )
        })
        .find(|(_, g)| max_error(g, f, &points) <= adaptive_error)
        .expect("some regular level reaches the adaptive grid's error");
    eprintln!(
        "adaptive: {} points, error {adaptive_error:.2e}; regular level {level}: {} points",
        adaptive.len(),
        regular.len()
    );
    assert!(
        adaptive.len() < regular.len(),
        "adaptive {} points, regular level {level} {} points",
        adaptive.len(),
        regular.len()
    );
}

#[test]
fn adaptive_refinement_stops_at_the_point_budget_and_the_level_cap() {
    let potential = Values { dim: 3, f: bump };
    let options = AdaptiveOptions {
        tolerance: 0.0,
        max_points: 200,
        ..AdaptiveOptions::default()
    };
    let grid = SparseGrid::adaptive(&potential, unit_box(3), &options, GIB).unwrap();
    assert!(grid.len() <= 200);
    assert!(matches!(
        grid.construction(),
        Construction::Adaptive {
            stop: AdaptiveStop::PointBudget,
            ..
        }
    ));
    // With every coordinate capped at level 2 and no tolerance, refinement fills the full
    // tensor grid of 5 points per coordinate.
    let options = AdaptiveOptions {
        tolerance: 0.0,
        max_points: 10_000,
        max_level: 2,
    };
    let grid = SparseGrid::adaptive(&potential, unit_box(3), &options, GIB).unwrap();
    assert_eq!(grid.len(), 125);
    assert!(matches!(
        grid.construction(),
        Construction::Adaptive {
            stop: AdaptiveStop::LevelCap,
            ..
        }
    ));
    for bad in [
        AdaptiveOptions {
            tolerance: -1.0,
            ..AdaptiveOptions::default()
        },
        AdaptiveOptions {
            max_points: 0,
            ..AdaptiveOptions::default()
        },
        AdaptiveOptions {
            max_level: 31,
            ..AdaptiveOptions::default()
        },
    ] {
        assert!(SparseGrid::adaptive(&potential, unit_box(3), &bad, GIB).is_err());
    }
}

#[test]
fn sparse_grid_over_the_memory_limit_is_refused_before_any_evaluation() {
    let potential = Counted::new(Values { dim: 3, f: bump });
    // Level 4 in d = 3: 177 points (checked against the paper's definition above) and
    // C(4 + 3, 3) = 35 subspaces of 3 + 9 bytes.
    let subspaces: u64 = (1..=3).map(|i| (4 + i) as u64).product::<u64>() / 6;
    assert_eq!(subspaces, 35);
    let bytes = 177 * 8 + subspaces * 12;
    let error = SparseGrid::regular(&potential, unit_box(3), 4, bytes - 1).unwrap_err();
    assert!(
        error.to_string().contains(&format!("{bytes} bytes")),
        "{error}"
    );
    assert_eq!(potential.calls(), 0);
    let grid = SparseGrid::regular(&potential, unit_box(3), 4, bytes).unwrap();
    assert_eq!(grid.bytes() as u64, bytes);
    assert_eq!(potential.calls(), 177);

    // Far too big: d = 10 at the finest level.
    let ten = Counted::new(Values {
        dim: 10,
        f: |_: &[f64]| 0.0,
    });
    let error = SparseGrid::regular(&ten, unit_box(10), 30, GIB).unwrap_err();
    let points = SparseGrid::regular_points(10, 30).unwrap();
    assert!(
        error.to_string().contains(&format!("({points} points)")),
        "{error}"
    );
    let options = AdaptiveOptions {
        max_points: usize::MAX,
        ..AdaptiveOptions::default()
    };
    assert!(SparseGrid::adaptive(&ten, unit_box(10), &options, GIB).is_err());
    assert_eq!(ten.calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Files

/// Asserts that two surrogates give the same bits for values and gradients at random points
/// of `domain`.
fn assert_same_bits(a: &dyn Surrogate, b: &dyn Surrogate, domain: &Domain, seed: u64) {
    let d = domain.dim();
    let (mut ga, mut gb) = (vec![0.0; d], vec![0.0; d]);
    let mut r = rng(seed);
    for _ in 0..500 {
        let q = point_in(domain, &mut r);
        assert!(a.contains(&q) && b.contains(&q));
        assert_eq!(a.value(&q).to_bits(), b.value(&q).to_bits());
        let (va, vb) = (
            a.value_and_gradient(&q, &mut ga),
            b.value_and_gradient(&q, &mut gb),
        );
        assert_eq!(va.to_bits(), vb.to_bits());
        for k in 0..d {
            assert_eq!(ga[k].to_bits(), gb[k].to_bits(), "{q:?}");
        }
    }
}

/// A meta whose floats are not short decimals, so a lossy format would show.
fn meta() -> SurrogateMeta {
    SurrogateMeta {
        model: "wavy".into(),
        train_seconds: 1.0 / 3.0,
        ..SurrogateMeta::default()
    }
}

#[test]
fn save_load_round_trip_through_kinds_is_bit_identical() {
    // Bounds that are not short decimals, so a lossy float format would show.
    let domain = Domain::new(vec![-1.0 / 3.0, -0.7], vec![1.3, 2.0 + 1e-9]).unwrap();
    let force = ForceGrid::build(&Wavy, domain.clone(), 0.1, Interpolation::Constant, GIB).unwrap();
    let path = temp_path("force");
    force.save(&path, &meta()).unwrap();
    let (loaded, read_meta) = kinds::load(&path, 2).unwrap();
    assert_same_bits(&force, loaded.as_ref(), &domain, 17);
    assert_eq!(
        read_meta.train_seconds.to_bits(),
        meta().train_seconds.to_bits()
    );
    let file = SurrogateFile::open(&path).unwrap();
    assert_eq!(file.kind(), Some(FORCE_GRID_KIND));
    let (again, _) = ForceGrid::read(&file).unwrap();
    assert_eq!(again.cells(), force.cells());
    assert_eq!(again.precomputation(), force.precomputation());
    let error = kinds::load(&path, 3).unwrap_err().to_string();
    assert!(error.contains("dimension 2"), "{error}");
    std::fs::remove_file(&path).unwrap();

    // The multilinear reading is the file's to say: loaded, the grid blends its corners again.
    let multilinear =
        ForceGrid::build(&Wavy, domain.clone(), 0.1, Interpolation::Multilinear, GIB).unwrap();
    let path = temp_path("multilinear");
    multilinear.save(&path, &meta()).unwrap();
    let (loaded, _) = kinds::load(&path, 2).unwrap();
    assert_same_bits(&multilinear, loaded.as_ref(), &domain, 23);
    let (again, _) = ForceGrid::read(&SurrogateFile::open(&path).unwrap()).unwrap();
    assert_eq!(again.interpolation(), Interpolation::Multilinear);
    assert_eq!(
        again.error_estimate().to_bits(),
        multilinear.error_estimate().to_bits()
    );
    // A file written before the reading was recorded is read at the cell centres.
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    value["surrogate"]
        .as_object_mut()
        .unwrap()
        .remove("interpolation");
    std::fs::write(&path, value.to_string()).unwrap();
    let error = kinds::load(&path, 2).unwrap_err().to_string();
    assert!(error.contains("cell centres needs"), "{error}");
    std::fs::remove_file(&path).unwrap();

    let regular = SparseGrid::regular(&Wavy, domain.clone(), 6, GIB).unwrap();
    let options = AdaptiveOptions {
        tolerance: 1e-3,
        ..AdaptiveOptions::default()
    };
    let adaptive = SparseGrid::adaptive(&Wavy, domain.clone(), &options, GIB).unwrap();
    for (name, grid) in [("regular", regular), ("adaptive", adaptive)] {
        let path = temp_path(name);
        grid.save(&path, &meta()).unwrap();
        let (loaded, _) = kinds::load(&path, 2).unwrap();
        assert_same_bits(&grid, loaded.as_ref(), &domain, 19);
        let file = SurrogateFile::open(&path).unwrap();
        assert_eq!(file.kind(), Some(SPARSE_GRID_KIND), "{name}");
        let (again, _) = SparseGrid::read(&file).unwrap();
        assert_eq!(again.construction(), grid.construction());
        assert_eq!(again.precomputation(), grid.precomputation());
        assert_eq!(
            again.error_estimate().to_bits(),
            grid.error_estimate().to_bits()
        );
        assert_eq!(again.points_per_level(), grid.points_per_level());
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn loading_rejects_inconsistent_files() {
    let grid = SparseGrid::regular(&Wavy, unit_box(2), 3, GIB).unwrap();
    let path = temp_path("broken");
    grid.save(&path, &meta()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let original: serde_json::Value = serde_json::from_str(&text).unwrap();
    let broken = |edit: &dyn Fn(&mut serde_json::Value), expect: &str| {
        let mut value = original.clone();
        edit(&mut value);
        std::fs::write(&path, value.to_string()).unwrap();
        let error = kinds::load(&path, 2).unwrap_err().to_string();
        assert!(error.contains(expect), "expected {expect:?} in {error}");
    };
    broken(&|v| v["version"] = 3.into(), "version 3");
    broken(
        &|v| v["format"] = "shmc-grid".into(),
        "not a surrogate file",
    );
    broken(
        &|v| v["kind"] = "mesh".into(),
        "unknown surrogate kind \"mesh\"",
    );
    broken(
        &|v| {
            v["surrogate"]["surpluses"].as_array_mut().unwrap().pop();
        },
        "surpluses",
    );
    broken(
        &|v| v["surrogate"]["levels"][1] = 5.into(),
        "lower neighbour",
    );
    broken(
        &|v| v["surrogate"]["levels"][1] = 40.into(),
        "above the maximum",
    );
    broken(
        &|v| v["surrogate"]["domain"]["upper"][0] = "-1".into(),
        "lower bound",
    );
    broken(
        &|v| v["surrogate"]["surpluses"][0] = "one".into(),
        "not a number",
    );
    std::fs::remove_file(&path).unwrap();
}

/// `U(q) = 3 q₀ − 2 q₁`, with its gradient: a plane, on which a cell's constant is furthest off
/// at the corners, by exactly `½ Σₖ |aₖ| wₖ`.
struct Plane;

impl Potential for Plane {
    fn dim(&self) -> usize {
        2
    }
    fn value(&self, q: &[f64]) -> f64 {
        3.0 * q[0] - 2.0 * q[1]
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        grad[0] = 3.0;
        grad[1] = -2.0;
        self.value(q)
    }
}

#[test]
fn force_grid_error_estimate_is_exact_on_a_plane_and_close_on_a_curved_potential() {
    let domain = Domain::new(vec![-1.0, 0.0], vec![1.0, 1.5]).unwrap();
    let grid =
        ForceGrid::build(&Plane, domain.clone(), 0.25, Interpolation::Constant, GIB).unwrap();
    let w = grid.widths();
    let want = 0.5 * (3.0 * w[0] + 2.0 * w[1]);
    assert!((grid.error_estimate() - want).abs() < 1e-12);
    assert_eq!(grid.sup_error_estimate(), Some(grid.error_estimate()));
    assert_estimate_is_close_on_wavy(Interpolation::Constant);
}

/// On a curved potential (`Wavy`, cells of 0.05) the largest `|U − Ũ|` at random points of the
/// box stays below the grid's error estimate plus what it leaves out, and is not far below it.
fn assert_estimate_is_close_on_wavy(interpolation: Interpolation) {
    let domain = Domain::new(vec![-1.0, 0.0], vec![1.0, 1.5]).unwrap();
    let grid = ForceGrid::build(&Wavy, domain.clone(), 0.05, interpolation, GIB).unwrap();
    let mut r = rng(4);
    let worst = (0..20_000)
        .map(|_| {
            let q = point_in(&domain, &mut r);
            (grid.value(&q) - Wavy.value(&q)).abs()
        })
        .fold(0.0, f64::max);
    let estimate = grid.error_estimate();
    assert!(
        worst <= 1.1 * estimate && worst >= 0.5 * estimate,
        "{interpolation:?}: {worst} vs {estimate}"
    );
}

// ---------------------------------------------------------------------------------------------
// Multilinear force grid

/// The multilinear blend of `f` at `q` from the corners of its cell, written from the
/// definition (weights `Πₖ tₖ` or `1 − tₖ`, the upper face in the last cell), for a grid of
/// `cells` cells of `widths` from `lower`.
fn blend_reference(
    f: impl Fn(&[f64]) -> f64,
    q: &[f64],
    lower: &[f64],
    widths: &[f64],
    cells: &[usize],
) -> f64 {
    let d = q.len();
    let index: Vec<usize> = (0..d)
        .map(|k| (((q[k] - lower[k]) / widths[k]).floor() as usize).min(cells[k] - 1))
        .collect();
    (0..1usize << d)
        .map(|corner| {
            let mut weight = 1.0;
            let point: Vec<f64> = (0..d)
                .map(|k| {
                    let t = (q[k] - lower[k]) / widths[k] - index[k] as f64;
                    let up = corner >> k & 1;
                    weight *= if up == 1 { t } else { 1.0 - t };
                    lower[k] + (index[k] + up) as f64 * widths[k]
                })
                .collect();
            weight * f(&point)
        })
        .sum()
}

/// A multilinear grid tabulates the cell corners (`cells + 1` per coordinate) and blends them:
/// `Bowl`'s gradient is linear, so the blended force is the exact one at every point of the
/// box (faces and corners included), while its quadratic `U` blends as the definition says;
/// outside, or for NaN, infinite or wrongly sized points, nothing, with the gradient untouched.
/// In dimensions 1 to 5: the lookup is unrolled up to 3 and a loop beyond.
#[test]
fn multilinear_force_grid_reads_a_linear_force_exactly_in_every_dimension() {
    for d in 1..=5 {
        let lower: Vec<f64> = (0..d).map(|k| -1.0 - 0.25 * k as f64).collect();
        let upper: Vec<f64> = (0..d).map(|k| 0.5 + 0.5 * k as f64).collect();
        let domain = Domain::new(lower.clone(), upper.clone()).unwrap();
        let counted = Counted::new(Bowl(d));
        let grid = ForceGrid::build(
            &counted,
            domain.clone(),
            0.3,
            Interpolation::Multilinear,
            GIB,
        )
        .unwrap();
        let (cells, widths) = (grid.cells().to_vec(), grid.widths().to_vec());
        let corners: usize = cells.iter().map(|c| c + 1).product();
        assert_eq!(grid.len(), corners);
        assert_eq!(counted.calls(), corners as u64);
        assert_eq!(grid.bytes(), corners * (d + 1) * 8);
        let points = lookup_probes(&domain, 10 + d as u64);
        let (mut inside, mut outside) = (0, 0);
        for q in &points {
            let mut grad = vec![7.0; q.len()];
            if q.len() != d || !domain.contains(q) {
                assert_eq!(grid.value_and_gradient_within(q, &mut grad), None, "{q:?}");
                assert!(!grid.gradient_within(q, &mut grad), "{q:?}");
                assert_eq!(grid.value_within(q), None);
                assert!(grad.iter().all(|&g| g == 7.0), "{q:?}");
                outside += 1;
                continue;
            }
            inside += 1;
            let value = grid.value_and_gradient_within(q, &mut grad).unwrap();
            let want = blend_reference(|p| Bowl(d).value(p), q, &lower, &widths, &cells);
            assert!((value - want).abs() <= 1e-12 * (1.0 + want.abs()), "{q:?}");
            assert_eq!(
                grid.value_within(q).map(f64::to_bits),
                Some(value.to_bits())
            );
            let mut exact = vec![0.0; d];
            Bowl(d).value_and_gradient(q, &mut exact);
            for (g, e) in grad.iter().zip(&exact) {
                assert!((g - e).abs() <= 1e-12 * (1.0 + e.abs()), "d = {d}, {q:?}");
            }
            // The leapfrog's path (the gradient alone) gives the same force.
            let mut alone = vec![7.0; d];
            assert!(grid.gradient_within(q, &mut alone));
            for (a, g) in alone.iter().zip(&grad) {
                assert!((a - g).abs() <= 1e-13 * (1.0 + g.abs()), "{q:?}");
            }
        }
        assert_probes_counted(d, inside, outside);
    }
}

/// The largest force error at random points of `Wavy`'s box, read as `interpolation` at cell
/// size `h`.
fn force_error(interpolation: Interpolation, h: f64) -> f64 {
    let domain = Domain::new(vec![-1.0, -0.5], vec![1.5, 2.0]).unwrap();
    let grid = ForceGrid::build(&Wavy, domain.clone(), h, interpolation, GIB).unwrap();
    let mut r = rng(21);
    let (mut approx, mut exact) = ([0.0; 2], [0.0; 2]);
    (0..20_000)
        .map(|_| {
            let q = point_in(&domain, &mut r);
            grid.gradient(&q, &mut approx);
            Wavy.value_and_gradient(&q, &mut exact);
            (approx[0] - exact[0]).hypot(approx[1] - exact[1])
        })
        .fold(0.0, f64::max)
}

/// Halving the cell halves the constant reading's largest force error (first order) and
/// quarters the multilinear one's (second order), which is also well below the constant's.
#[test]
fn multilinear_force_error_is_second_order_in_the_cell_size() {
    for (interpolation, low, high) in [
        (Interpolation::Constant, 1.6, 2.4),
        (Interpolation::Multilinear, 3.2, 4.8),
    ] {
        let (coarse, fine) = (
            force_error(interpolation, 0.1),
            force_error(interpolation, 0.05),
        );
        let ratio = coarse / fine;
        assert!(
            (low..high).contains(&ratio),
            "{interpolation:?}: {coarse} / {fine} = {ratio}"
        );
    }
    let (constant, multilinear) = (
        force_error(Interpolation::Constant, 0.1),
        force_error(Interpolation::Multilinear, 0.1),
    );
    assert!(multilinear < constant / 10.0, "{multilinear} vs {constant}");
}

/// A multilinear grid's `‖U − Ũ‖∞` estimate, `⅛ Σₖ wₖ |Δₖ ∂ₖU|`, is linear interpolation's
/// exact error `⅛ a w²` on a 1-D parabola `½ a x²` (`Bowl(1)`, `a = 4`), reached at a cell's
/// midpoint, and close to the largest error on a curved 2-D potential.
#[test]
fn multilinear_error_estimate_is_exact_on_a_parabola_and_close_on_a_curved_potential() {
    let a = 4.0;
    let domain = Domain::new(vec![-1.0], vec![1.0]).unwrap();
    let grid = ForceGrid::build(&Bowl(1), domain, 0.25, Interpolation::Multilinear, GIB).unwrap();
    let w = grid.widths()[0];
    let want = a * w * w / 8.0;
    let estimate = grid.error_estimate();
    assert!((estimate - want).abs() < 1e-12, "{estimate} vs {want}");
    let midpoint = [-1.0 + 2.5 * w];
    let error = (grid.value(&midpoint) - Bowl(1).value(&midpoint)).abs();
    assert!((error - want).abs() < 1e-12, "{error} vs {want}");
    assert_eq!(grid.sup_error_estimate(), Some(estimate));
    assert_estimate_is_close_on_wavy(Interpolation::Multilinear);
}

/// A multilinear grid's last corners lie on the box's upper faces themselves, so a model
/// undefined just past them builds (its size is checked with the constant grid's in
/// `force_grid_over_the_memory_limit_is_refused_before_any_evaluation`).
#[test]
fn multilinear_grid_corners_stay_inside_the_box() {
    // 7 cells of 0.9 / 7 add up to 0.9000000000000001, past the box.
    let domain = Domain::new(vec![0.0], vec![0.9]).unwrap();
    let grid = ForceGrid::build(
        &SlopeUpTo(0.9),
        domain,
        0.9 / 7.0,
        Interpolation::Multilinear,
        GIB,
    );
    assert!(grid.is_ok(), "{:?}", grid.err());
}

/// `U(x) = x` on `[0, end]`, undefined (NaN) past `end`.
struct SlopeUpTo(f64);

impl Potential for SlopeUpTo {
    fn dim(&self) -> usize {
        1
    }
    fn value(&self, q: &[f64]) -> f64 {
        if (0.0..=self.0).contains(&q[0]) {
            q[0]
        } else {
            f64::NAN
        }
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let value = self.value(q);
        grad[0] = if value.is_finite() { 1.0 } else { f64::NAN };
        value
    }
}
