//! The quadratic mean function: `q(x) = c + bᵀz + ½ zᵀAz` with `z = x − x̄` (the training
//! positions' mean, so that a posterior far from the origin stays well conditioned), fitted by
//! least squares to the training potentials before the GP, which is then fitted to the
//! residuals `U − q`.
//!
//! Why: the constant mean reverts to a constant away from the training states, so its gradient
//! vanishes there and a trajectory that leaves them drifts. A posterior's potential is close to
//! quadratic far out, so a quadratic mean keeps pulling it back (and on an exactly quadratic
//! `U` the residuals vanish and the mean extrapolates exactly).
//!
//! The fit solves the normal equations of the `1 + d + d(d+1)/2` monomials with a ridge of
//! [`RIDGE`] times their mean diagonal, so that fewer states than monomials still give the
//! least-norm-like fit instead of a singular system.

use faer::linalg::solvers::Solve;
use faer::{Mat, Side};

use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// The normal equations' ridge relative to their mean diagonal.
const RIDGE: f64 = 1e-12;

/// The number of monomials of a full quadratic in dimension `d` (`None` on overflow).
pub(super) fn monomials(d: usize) -> Option<usize> {
    d.checked_add(1)?
        .checked_mul(d)?
        .checked_div(2)?
        .checked_add(d)?
        .checked_add(1)
}

/// The bytes the fit holds on `n` states in dimension `d` (`None` on overflow): the normal
/// equations and their factor (`2p²` for `p` monomials), one row of monomials, the residual
/// states (`n(2d + 1)`: positions, potentials, gradients) and the mean's Hessian (`d²`).
pub(super) fn bytes(n: usize, d: usize) -> Option<u128> {
    let p = monomials(d)? as u128;
    let (n, d) = (n as u128, d as u128);
    let normal = p.checked_mul(p)?.checked_mul(2)?;
    let rows = n.checked_mul(d.checked_mul(2)?.checked_add(1)?)?;
    normal
        .checked_add(rows)?
        .checked_add(d.checked_mul(d)?)?
        .checked_add(p)?
        .checked_mul(8)
}

/// A fitted quadratic `q(x) = c + bᵀz + ½ zᵀAz`, `z = x − centre`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quadratic {
    /// `x̄`.
    pub centre: Vec<f64>,
    /// `c`.
    pub constant: f64,
    /// `b`.
    pub linear: Vec<f64>,
    /// `A`, `d × d` row-major, symmetric.
    pub hessian: Vec<f64>,
}

impl Quadratic {
    /// The least-squares quadratic through `states`' potentials.
    pub fn fit(states: &TrainingSet) -> Result<Self> {
        let (n, d) = (states.len(), states.dim());
        let centre: Vec<f64> = (0..d)
            .map(|k| (0..n).map(|i| states.position(i)[k]).sum::<f64>() / n as f64)
            .collect();
        let p = monomials(d).ok_or_else(|| Error::invalid("too many monomials"))?;
        let mut normal = Mat::<f64>::zeros(p, p);
        let mut right = Mat::<f64>::zeros(p, 1);
        let mut row = vec![0.0; p];
        for i in 0..n {
            monomial_row(states.position(i), &centre, &mut row);
            for (a, &ra) in row.iter().enumerate() {
                right[(a, 0)] += ra * states.potential(i);
                for (b, &rb) in row.iter().enumerate().take(a + 1) {
                    normal[(a, b)] += ra * rb;
                }
            }
        }
        let mean_diagonal = (0..p).map(|a| normal[(a, a)]).sum::<f64>() / p as f64;
        for a in 0..p {
            normal[(a, a)] += RIDGE * mean_diagonal.max(f64::MIN_POSITIVE);
        }
        let llt = normal.llt(Side::Lower).map_err(|_| {
            Error::invalid("the quadratic mean's least-squares equations do not factorize")
        })?;
        let beta = llt.solve(&right);
        Ok(Self::from_coefficients(
            centre,
            &(0..p).map(|a| beta[(a, 0)]).collect::<Vec<_>>(),
        ))
    }

    /// The quadratic of the coefficients of [`monomial_row`]'s monomials.
    fn from_coefficients(centre: Vec<f64>, beta: &[f64]) -> Self {
        let d = centre.len();
        let mut hessian = vec![0.0; d * d];
        let mut next = 1 + d;
        for j in 0..d {
            for k in j..d {
                // β zⱼzₖ: ∂² is 2β on the diagonal, β off it (both entries).
                let h = if j == k { 2.0 * beta[next] } else { beta[next] };
                hessian[j * d + k] = h;
                hessian[k * d + j] = h;
                next += 1;
            }
        }
        Self {
            centre,
            constant: beta[0],
            linear: beta[1..=d].to_vec(),
            hessian,
        }
    }

    /// `q(x)`, and `∇q(x)` added into `grad` when given.
    pub fn add_value_and_gradient(&self, x: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let d = self.centre.len();
        let z: Vec<f64> = x.iter().zip(&self.centre).map(|(a, c)| a - c).collect();
        let mut value = self.constant;
        let mut slope = self.linear.clone();
        for j in 0..d {
            let az: f64 = (0..d).map(|k| self.hessian[j * d + k] * z[k]).sum();
            slope[j] += az;
            value += z[j] * (self.linear[j] + 0.5 * az);
        }
        if let Some(grad) = grad {
            grad.iter_mut().zip(&slope).for_each(|(g, s)| *g += s);
        }
        value
    }

    /// A setting read back from a file that does not fit dimension `d`, in words.
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        let sizes = (self.centre.len(), self.linear.len(), self.hessian.len());
        if sizes != (d, d, d * d) {
            return Err(format!(
                "the quadratic mean has {sizes:?} centre, linear and Hessian entries for \
                 dimension {d}"
            ));
        }
        let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
        let all = [&self.centre, &self.linear, &self.hessian];
        if !(all.into_iter().all(|v| finite(v)) && self.constant.is_finite()) {
            return Err("the quadratic mean's coefficients are not all finite".into());
        }
        Ok(())
    }

    /// `states` with their potentials and gradients replaced by the residuals `U − q`,
    /// `∇U − ∇q`.
    pub fn residuals(&self, states: &TrainingSet) -> TrainingSet {
        let mut out = TrainingSet::new(states.dim());
        let mut slope = vec![0.0; states.dim()];
        for i in 0..states.len() {
            let x = states.position(i);
            slope.fill(0.0);
            let u = states.potential(i) - self.add_value_and_gradient(x, Some(&mut slope));
            let gradient = states
                .gradient(i)
                .map(|g| g.iter().zip(&slope).map(|(a, b)| a - b).collect::<Vec<_>>());
            out.push(x, u, gradient.as_deref());
        }
        out
    }
}

/// The monomials `1, zₖ, zⱼzₖ (j ≤ k)` of `z = x − centre`, into `row`.
fn monomial_row(x: &[f64], centre: &[f64], row: &mut [f64]) {
    let d = x.len();
    let z: Vec<f64> = x.iter().zip(centre).map(|(a, c)| a - c).collect();
    row[0] = 1.0;
    row[1..=d].copy_from_slice(&z);
    let mut next = 1 + d;
    for j in 0..d {
        for k in j..d {
            row[next] = z[j] * z[k];
            next += 1;
        }
    }
}
