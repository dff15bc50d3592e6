//! The transforms applied to a design matrix before fitting: standardization, a seeded Gaussian
//! random projection and an intercept column.
//!
//! [`Dataset::preprocess`] applies the chosen ones in a fixed order: **standardize, project,
//! then add the intercept**. Standardizing first puts every feature on the same scale before
//! they are mixed; the intercept comes last so that it is neither centred away (a constant
//! column standardizes to 0) nor smeared across the projected features.

use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;

use super::Dataset;
use crate::{Error, Result};

/// The name given to the intercept column.
pub const INTERCEPT_NAME: &str = "intercept";

/// A seeded Gaussian random projection to `k` features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Projection {
    /// The number of features after the projection.
    pub k: usize,
    /// The seed of the projection matrix.
    pub seed: u64,
    /// The most bytes the projection matrix and the projected data may take
    /// ([`crate::memory`]); a larger `k` is refused before either is allocated.
    pub memory_limit: u64,
}

/// Which transforms [`Dataset::preprocess`] applies (always in the order of the fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preprocessing {
    /// Centre every column to mean 0 and scale it to standard deviation 1.
    pub standardize: bool,
    /// Replace the features by a random projection of them.
    pub projection: Option<Projection>,
    /// Prepend a column of ones named [`INTERCEPT_NAME`].
    pub intercept: bool,
}

/// The column means and standard deviations a standardization used, kept so that the same
/// transform can be applied to other data (a test set).
#[derive(Clone, Debug, PartialEq)]
pub struct Standardization {
    /// The mean of every column.
    pub means: Vec<f64>,
    /// The standard deviation of every column (divisor `n`); 0 for a constant column.
    pub sds: Vec<f64>,
    /// The names of the constant columns, which are left at 0 after centring.
    pub constant: Vec<String>,
}

impl Standardization {
    /// Centres and scales the columns of `data` with these means and standard deviations
    /// (constant columns are only centred).
    pub fn apply(&self, data: &mut Dataset) -> Result<()> {
        if self.means.len() != data.p {
            return Err(Error::invalid(format!(
                "standardization was fitted on {} columns, the data have {}",
                self.means.len(),
                data.p
            )));
        }
        let scales: Vec<f64> = self
            .sds
            .iter()
            .map(|&sd| if sd > 0.0 { 1.0 / sd } else { 0.0 })
            .collect();
        for row in data.x.chunks_exact_mut(data.p.max(1)) {
            for ((v, m), s) in row.iter_mut().zip(&self.means).zip(&scales) {
                *v = (*v - m) * s;
            }
        }
        Ok(())
    }
}

impl Dataset {
    /// Centres every column to mean 0 and scales it to standard deviation 1 (divisor `n`).
    ///
    /// A column whose entries are all equal cannot be scaled: it is set to 0 and its name is
    /// listed in [`Standardization::constant`].
    pub fn standardize(&mut self) -> Standardization {
        let (n, p) = (self.n, self.p);
        let mut means = vec![0.0; p];
        for row in self.x.chunks_exact(p.max(1)) {
            for (m, v) in means.iter_mut().zip(row) {
                *m += v;
            }
        }
        means.iter_mut().for_each(|m| *m /= n.max(1) as f64);
        let mut sums = vec![0.0; p];
        let mut constant_flags = vec![true; p];
        let first: Vec<f64> = self.x.get(..p).unwrap_or_default().to_vec();
        for row in self.x.chunks_exact(p.max(1)) {
            for j in 0..p {
                let c = row[j] - means[j];
                sums[j] += c * c;
                constant_flags[j] &= row[j] == first[j];
            }
        }
        let sds: Vec<f64> = (0..p)
            .map(|j| {
                if constant_flags[j] {
                    0.0
                } else {
                    (sums[j] / n as f64).sqrt()
                }
            })
            .collect();
        let constant = (0..p)
            .filter(|&j| constant_flags[j])
            .map(|j| self.feature_names[j].clone())
            .collect();
        let standardization = Standardization {
            means,
            sds,
            constant,
        };
        standardization
            .apply(self)
            .expect("fitted on these columns");
        standardization
    }

    /// Replaces the `p` features by `k` random combinations of them: `X ← X R` with `R` a
    /// `p × k` matrix of independent `N(0, 1/k)` entries.
    ///
    /// `R` is filled row by row from `Pcg64::seed_from_u64(seed)` with
    /// [`fill_standard_normal`], then scaled by `1/√k`, so the same seed gives the same matrix
    /// on every platform (and the same projection of a test set). The new columns are named
    /// `proj.1 … proj.k`. A `k` whose matrix and projected data (and their names) would pass
    /// `memory_limit` bytes is an [`Error::MemoryLimit`] driven by `project`, before either is
    /// allocated.
    pub fn project(&mut self, k: usize, seed: u64, memory_limit: u64) -> Result<()> {
        if k == 0 {
            return Err(Error::invalid(
                "a random projection needs at least one output feature",
            ));
        }
        let p = self.p;
        let bytes = p
            .checked_add(self.n)
            .and_then(|rows| crate::memory::f64s([k, rows]))
            .and_then(|b| b.checked_add(super::COLUMN_BYTES.checked_mul(k as u128)?));
        crate::memory::check(
            &format!(
                "a random projection of {} rows × {p} columns to {k}",
                self.n
            ),
            "project",
            bytes,
            memory_limit,
        )?;
        let mut r = vec![0.0; p * k];
        fill_standard_normal(&mut Pcg64::seed_from_u64(seed), &mut r);
        let scale = 1.0 / (k as f64).sqrt();
        r.iter_mut().for_each(|v| *v *= scale);
        let mut out = vec![0.0; self.n * k];
        for (row_out, row) in out.chunks_exact_mut(k).zip(self.x.chunks_exact(p.max(1))) {
            for (&xj, r_row) in row.iter().zip(r.chunks_exact(k)) {
                if xj != 0.0 {
                    shmc_core::linalg::axpy(xj, r_row, row_out);
                }
            }
        }
        self.x = out;
        self.p = k;
        self.feature_names = crate::model::indexed_names("proj", k);
        Ok(())
    }

    /// Prepends a column of ones named [`INTERCEPT_NAME`].
    pub fn add_intercept(&mut self) {
        let p = self.p;
        let mut out = Vec::with_capacity(self.n * (p + 1));
        for i in 0..self.n {
            out.push(1.0);
            out.extend_from_slice(&self.x[i * p..(i + 1) * p]);
        }
        self.x = out;
        self.p = p + 1;
        self.feature_names.insert(0, INTERCEPT_NAME.to_string());
    }

    /// Applies the chosen transforms in the documented order (standardize, project, then add
    /// the intercept) and returns the standardization, if one was done, so that the caller can
    /// report the constant columns or transform a test set the same way.
    pub fn preprocess(&mut self, steps: &Preprocessing) -> Result<Option<Standardization>> {
        let standardization = steps.standardize.then(|| self.standardize());
        if let Some(projection) = steps.projection {
            self.project(projection.k, projection.seed, projection.memory_limit)?;
        }
        if steps.intercept {
            self.add_intercept();
        }
        Ok(standardization)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Dataset {
        // Column 0 varies, column 1 is constant, column 2 is binary.
        let x = vec![1.0, 5.0, 0.0, 2.0, 5.0, 1.0, 3.0, 5.0, 0.0, 6.0, 5.0, 1.0];
        Dataset::new(
            x,
            vec![0.0, 1.0, 0.0, 1.0],
            4,
            3,
            vec!["a".into(), "b".into(), "c".into()],
        )
        .unwrap()
    }

    #[test]
    fn standardize_gives_mean_zero_sd_one_and_reports_constant_columns() {
        let mut d = small();
        let s = d.standardize();
        assert_eq!(s.constant, vec!["b".to_string()]);
        for j in [0, 2] {
            let col: Vec<f64> = (0..4).map(|i| d.row(i)[j]).collect();
            let mean = col.iter().sum::<f64>() / 4.0;
            let var = col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0;
            assert!(mean.abs() < 1e-15, "column {j} mean {mean}");
            assert!((var - 1.0).abs() < 1e-14, "column {j} var {var}");
        }
        assert!((0..4).all(|i| d.row(i)[1] == 0.0));
        assert_eq!(s.means, vec![3.0, 5.0, 0.5]);
    }

    #[test]
    fn standardization_applies_to_other_data_with_the_fitted_moments() {
        let mut train = small();
        let s = train.standardize();
        let mut test = small();
        s.apply(&mut test).unwrap();
        assert_eq!(train.x, test.x);
        let mut narrow = Dataset::new(vec![1.0], vec![1.0], 1, 1, vec!["a".into()]).unwrap();
        assert!(s.apply(&mut narrow).is_err());
    }

    #[test]
    fn projection_is_seeded_and_scaled() {
        let mut a = small();
        let mut b = small();
        a.project(2, 7, u64::MAX).unwrap();
        b.project(2, 7, u64::MAX).unwrap();
        assert_eq!(a.x, b.x);
        assert_eq!(
            (a.p, a.feature_names.clone()),
            (2, vec!["proj.1".into(), "proj.2".into()])
        );
        let mut c = small();
        c.project(2, 8, u64::MAX).unwrap();
        assert_ne!(a.x, c.x);
        assert!(small().project(0, 1, u64::MAX).is_err());
        // 10¹² output features asked 24 TB of the allocator, which aborted.
        match small().project(1_000_000_000_000, 1, 1 << 30).unwrap_err() {
            Error::MemoryLimit { message, driver } => {
                assert_eq!(driver, "project");
                assert!(message.contains("to 1000000000000"), "{message}");
            }
            other => panic!("{other:?}"),
        }

        // The entries of R = projection of the identity have variance 1/k.
        let p = 200;
        let k = 50;
        let mut eye = vec![0.0; p * p];
        (0..p).for_each(|i| eye[i * p + i] = 1.0);
        let mut d = Dataset::new(eye, vec![0.0; p], p, p, vec!["x".into(); p]).unwrap();
        d.project(k, 3, u64::MAX).unwrap();
        let var = d.x.iter().map(|v| v * v).sum::<f64>() / (p * k) as f64;
        // sd of the mean of 10⁴ squared normals ≈ √2/100 relative.
        assert!(
            (var * k as f64 - 1.0).abs() < 0.06,
            "k·var = {}",
            var * k as f64
        );
    }

    #[test]
    fn preprocess_standardizes_projects_then_adds_the_intercept() {
        let mut d = small();
        let s = d
            .preprocess(&Preprocessing {
                standardize: true,
                projection: Some(Projection {
                    k: 2,
                    seed: 1,
                    memory_limit: u64::MAX,
                }),
                intercept: true,
            })
            .unwrap()
            .unwrap();
        assert_eq!(s.constant, vec!["b".to_string()]);
        assert_eq!(d.p, 3);
        assert_eq!(d.feature_names[0], INTERCEPT_NAME);
        assert!((0..4).all(|i| d.row(i)[0] == 1.0));

        let mut by_hand = small();
        by_hand.standardize();
        by_hand.project(2, 1, u64::MAX).unwrap();
        by_hand.add_intercept();
        assert_eq!(by_hand.x, d.x);
    }
}
