//! Property tests: what must hold for every input, on random ones (proptest, fixed seeds from
//! its default config, few cases each so the file runs in a few seconds in release).
//!
//! - The readers give back what was written: a random data set written as CSV (either
//!   delimiter, numeric and categorical columns) or LIBSVM reads back to the same values.
//! - The online kernels agree with their batch definitions: Greville's recursion with the
//!   minimum-norm least-squares solution (nalgebra's SVD) and with the ridge solution; online
//!   score matching with the ridge normal equations of all blocks at once.
//! - Leapfrog is reversible: forward, flip the momentum, forward again returns to the start.

use std::fmt::Write;
use std::path::Path;

use nalgebra::{DMatrix, DVector};
use proptest::prelude::*;
use shmc::core::{
    DiagonalMetric, Dyn, Exact, OnlineGreville, OnlineScoreMatching, Potential, leapfrog,
};
use shmc::data::{Missing, parse_csv, parse_libsvm};

/// A finite number that the writers format and the readers parse back exactly.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e6..1e6f64,
        (-300..300i32).prop_map(|e| 1.5 * 10f64.powi(e)),
        Just(0.0),
        Just(-0.0),
    ]
}

/// A data set: `rows` rows of numeric columns, responses 0/1, and one categorical column
/// (levels `a`, `b`, `c`) when `levels` is non-empty.
#[derive(Clone, Debug)]
struct Table {
    numeric: Vec<Vec<f64>>,
    levels: Vec<usize>,
    y: Vec<bool>,
}

fn table() -> impl Strategy<Value = Table> {
    (1..20usize, 1..5usize, any::<bool>()).prop_flat_map(|(rows, columns, categorical)| {
        (
            prop::collection::vec(prop::collection::vec(value(), columns), rows),
            prop::collection::vec(0..3usize, if categorical { rows } else { 0 }),
            prop::collection::vec(any::<bool>(), rows),
        )
            .prop_map(|(numeric, levels, y)| Table { numeric, levels, y })
    })
}

/// Runs the property tests with `cases` random cases (proptest's seeds are fixed unless
/// PROPTEST_RNG_SEED says otherwise; failures persist nothing to disk).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn csv_round_trips(table in table(), semicolon in any::<bool>(), yes_no in any::<bool>()) {
        let sep = if semicolon { ';' } else { ',' };
        let columns = table.numeric[0].len();
        let mut text: Vec<String> = (1..=columns).map(|j| format!("x{j}")).collect();
        if !table.levels.is_empty() {
            text.push("\"kind\"".into());
        }
        text.push("y".into());
        let mut csv = text.join(&sep.to_string());
        csv.push('\n');
        for (i, row) in table.numeric.iter().enumerate() {
            for v in row {
                write!(csv, "{v}{sep}").unwrap();
            }
            if let Some(level) = table.levels.get(i) {
                write!(csv, "\"{}\"{sep}", ["a", "b", "c"][*level]).unwrap();
            }
            let y = match (yes_no, table.y[i]) {
                (true, true) => "yes",
                (true, false) => "no",
                (false, true) => "1",
                (false, false) => "0",
            };
            writeln!(csv, "{y}").unwrap();
        }
        let data = parse_csv(&csv, Path::new("t.csv"), "y", Missing::Error, u64::MAX)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{csv}")))?;
        // Levels are one-hot against the first one seen, in order of appearance.
        let mut seen: Vec<usize> = Vec::new();
        for &level in &table.levels {
            if !seen.contains(&level) {
                seen.push(level);
            }
        }
        let indicators = seen.len().saturating_sub(1);
        prop_assert_eq!((data.n, data.p), (table.y.len(), columns + indicators));
        for (i, row) in table.numeric.iter().enumerate() {
            prop_assert_eq!(&data.row(i)[..columns], &row[..]);
            if let Some(&level) = table.levels.get(i) {
                let rank = seen.iter().position(|&l| l == level).unwrap();
                for k in 1..seen.len() {
                    prop_assert_eq!(data.row(i)[columns + k - 1], f64::from(u8::from(k == rank)));
                }
            }
            prop_assert_eq!(data.y[i], f64::from(u8::from(table.y[i])));
        }
    }

    #[test]
    fn libsvm_round_trips(table in table(), extra in 0..3usize, minus in any::<bool>()) {
        let p = table.numeric[0].len();
        let mut text = String::new();
        for (row, &y) in table.numeric.iter().zip(&table.y) {
            text.push_str(match (y, minus) {
                (true, _) => "+1",
                (false, true) => "-1",
                (false, false) => "0",
            });
            for (j, v) in row.iter().enumerate().filter(|(_, v)| **v != 0.0) {
                write!(text, " {}:{v}", j + 1).unwrap();
            }
            text.push('\n');
        }
        let data = parse_libsvm(&text, Path::new("t.svm"), Some(p + extra), u64::MAX)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!((data.n, data.p), (table.y.len(), p + extra));
        for (i, row) in table.numeric.iter().enumerate() {
            prop_assert_eq!(&data.row(i)[..p], &row[..]);
            prop_assert!(data.row(i)[p..].iter().all(|&v| v == 0.0));
            prop_assert_eq!(data.y[i], f64::from(u8::from(table.y[i])));
        }
    }
}

/// A `rows × columns` matrix of entries in (−1, 1), column-major.
fn matrix(rows: usize, columns: usize) -> impl Strategy<Value = DMatrix<f64>> {
    prop::collection::vec(-1.0..1.0f64, rows * columns)
        .prop_map(move |v| DMatrix::from_vec(rows, columns, v))
}

/// `‖a − b‖ ≤ tol · max(1, ‖b‖)`.
fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    let diff = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>();
    let norm = b.iter().map(|y| y * y).sum::<f64>();
    diff.sqrt() <= tol * norm.sqrt().max(1.0)
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn greville_matches_batch_minimum_norm_least_squares(
        (h, t) in (1..12usize, 1..7usize).prop_flat_map(|(k, s)| {
            (matrix(k, s), prop::collection::vec(-5.0..5.0f64, k))
        })
    ) {
        let (k, s) = h.shape();
        let mut online = OnlineGreville::new(Dyn(s), 1e-8).unwrap();
        for i in 0..k {
            let row: Vec<f64> = h.row(i).iter().copied().collect();
            online.update(&row, t[i]);
        }
        let batch = h.clone().svd(true, true).solve(&DVector::from_vec(t.clone()), 1e-10).unwrap();
        prop_assert_eq!(online.rank(), k.min(s));
        prop_assert!(
            close(online.weights(), batch.as_slice(), 1e-6),
            "online {:?} batch {:?}", online.weights(), batch.as_slice()
        );
    }

    #[test]
    fn greville_ridge_matches_the_ridge_normal_equations(
        (h, t) in (1..12usize, 1..7usize).prop_flat_map(|(k, s)| {
            (matrix(k, s), prop::collection::vec(-5.0..5.0f64, k))
        }),
        lambda in 1e-3..10.0f64,
    ) {
        let s = h.ncols();
        let mut online = OnlineGreville::ridge(Dyn(s), lambda).unwrap();
        for (i, &target) in t.iter().enumerate() {
            let row: Vec<f64> = h.row(i).iter().copied().collect();
            online.update(&row, target);
        }
        let normal = h.transpose() * &h + DMatrix::identity(s, s) * lambda;
        let batch = normal
            .cholesky()
            .unwrap()
            .solve(&(h.transpose() * DVector::from_vec(t)));
        prop_assert!(close(online.weights(), batch.as_slice(), 1e-8));
    }

    #[test]
    fn online_score_matching_matches_batch_ridge(
        (blocks, targets) in (1..4usize, 1..6usize, 1..8usize).prop_flat_map(|(d, s, n)| {
            (
                prop::collection::vec(matrix(d, s), n),
                prop::collection::vec(prop::collection::vec(-5.0..5.0f64, d), n),
            )
        }),
        lambda in 1e-3..10.0f64,
    ) {
        let (d, s) = blocks[0].shape();
        let mut online = OnlineScoreMatching::new(Dyn(d), Dyn(s), lambda).unwrap();
        let mut normal = DMatrix::identity(s, s) * lambda;
        let mut rhs = DVector::zeros(s);
        for (a, g) in blocks.iter().zip(&targets) {
            online.update(a.as_slice(), g).unwrap();
            normal += a.transpose() * a;
            rhs += a.transpose() * DVector::from_column_slice(g);
        }
        let batch = normal.cholesky().unwrap().solve(&rhs);
        prop_assert_eq!(online.updates(), blocks.len());
        prop_assert!(
            close(online.weights(), batch.as_slice(), 1e-8),
            "online {:?} batch {:?}", online.weights(), batch.as_slice()
        );
    }
}

/// A smooth random potential: `U(q) = Σ aᵢqᵢ²/2 + b(Σqᵢ²)²/4 + c Σ sin(wᵢqᵢ)`.
#[derive(Clone, Debug)]
struct Smooth {
    a: Vec<f64>,
    b: f64,
    c: f64,
    w: Vec<f64>,
}

impl Potential for Smooth {
    fn dim(&self) -> usize {
        self.a.len()
    }
    fn value(&self, q: &[f64]) -> f64 {
        let r2: f64 = q.iter().map(|x| x * x).sum();
        let quadratic: f64 = self.a.iter().zip(q).map(|(a, x)| 0.5 * a * x * x).sum();
        let waves: f64 = self.w.iter().zip(q).map(|(w, x)| (w * x).sin()).sum();
        quadratic + 0.25 * self.b * r2 * r2 + self.c * waves
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let r2: f64 = q.iter().map(|x| x * x).sum();
        for i in 0..q.len() {
            grad[i] = self.a[i] * q[i]
                + self.b * r2 * q[i]
                + self.c * self.w[i] * (self.w[i] * q[i]).cos();
        }
        self.value(q)
    }
}

fn smooth() -> impl Strategy<Value = (Smooth, Vec<f64>, Vec<f64>, Vec<f64>)> {
    (1..6usize).prop_flat_map(|d| {
        (
            prop::collection::vec(0.1..2.0f64, d),
            0.0..0.1f64,
            -1.0..1.0f64,
            prop::collection::vec(0.5..2.0f64, d),
            prop::collection::vec(-2.0..2.0f64, d),
            prop::collection::vec(-2.0..2.0f64, d),
            prop::collection::vec(0.5..2.0f64, d),
        )
            .prop_map(|(a, b, c, w, q, p, inv_mass)| (Smooth { a, b, c, w }, q, p, inv_mass))
    })
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn leapfrog_is_reversible(
        (potential, q0, p0, inv_mass) in smooth(),
        eps in 0.005..0.1f64,
        steps in 1..40u32,
    ) {
        let metric = DiagonalMetric::new(DVector::from_vec(inv_mass)).unwrap();
        let dynamics = Exact(&potential);
        let (mut q, mut p) = (q0.clone(), p0.clone());
        let mut grad = vec![0.0; q.len()];
        potential.value_and_gradient(&q, &mut grad);
        let u = leapfrog(&dynamics, &metric, eps, steps, &mut q, &mut p, &mut grad);
        prop_assert!(u.is_finite());
        p.iter_mut().for_each(|x| *x = -*x);
        leapfrog(&dynamics, &metric, eps, steps, &mut q, &mut p, &mut grad);
        p.iter_mut().for_each(|x| *x = -*x);
        prop_assert!(close(&q, &q0, 1e-9), "q {q:?} from {q0:?}");
        prop_assert!(close(&p, &p0, 1e-9), "p {p:?} from {p0:?}");
    }
}
