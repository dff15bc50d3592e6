//! FITC (Snelson & Ghahramani 2006): the full GP's covariance replaced by `Q + Λ`, with
//! `Q = K_fu K_uu⁻¹ K_uf` through `M` inducing points and `Λ` the diagonal that restores the
//! exact variances plus the noise. Everything goes through `M × N` and `M × M` matrices:
//! `O(N·M²)` to fit, `O(M·N)` memory, and a predictive mean with a centre at every inducing
//! point, `O(M·d)` per gradient.
//!
//! The evidence and its gradient follow GPML's `infFITC`. Its gradient is linear in the
//! kernel's derivatives `(∂diag K, ∂K_uu, ∂K_uf)`, so it is computed once as the adjoints of
//! those three (`O(N·M²)`) and contracted with each hyperparameter's derivative elementwise
//! (`O((N·M + M²)·d)` for all `d` length scales) instead of GPML's `O(N·M²)` per
//! hyperparameter, which at `d = 32` would multiply the cost by 35.

use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Mat, Par, Side};

use super::hyper::{Evidence, Hyper, NUGGET};
use super::kernel::{Predictor, correlation, inverse_squares};
use crate::surrogates::states::TrainingSet;

/// The bytes FITC with `m` inducing points on `n` states in dimension `d` holds while it fits
/// (`None` on overflow): six `m × n` matrices (`K_uf`, `V`, `B`, `W`, `P`, a product), eight
/// `m × m` (`K_uu`, its factor and inverse, `A`, its factor, two products, an adjoint) and
/// `n(d + 6) + m·d` for the positions and vectors.
pub(super) fn bytes(m: usize, n: usize, d: usize) -> Option<u128> {
    let (m, n, d) = (m as u128, n as u128, d as u128);
    let wide = m.checked_mul(n)?.checked_mul(6)?;
    let square = m.checked_mul(m)?.checked_mul(8)?;
    let rows = n
        .checked_mul(d.checked_add(6)?)?
        .checked_add(m.checked_mul(d)?)?;
    wide.checked_add(square)?.checked_add(rows)?.checked_mul(8)
}

/// The evidence of the standardized `values` of `states` under FITC with the inducing points
/// `inducing` (`M × d`, row-major).
pub(super) struct FitcEvidence<'a> {
    pub states: &'a TrainingSet,
    pub values: &'a [f64],
    pub inducing: &'a [f64],
}

/// What the evidence, its gradient and the posterior share at one `θ`.
struct Factors {
    /// `K_uu = σ_f²(C_uu + δI)`, `M × M`.
    kuu: Mat<f64>,
    /// `K_uf`, `M × N`.
    kuf: Mat<f64>,
    /// `K_uu = L_u L_uᵀ`.
    luu: faer::linalg::solvers::Llt<f64>,
    /// `V = L_u⁻¹ K_uf`, so that `Q = VᵀV`.
    v: Mat<f64>,
    /// `g = diag(K) + σ_n² − diag(Q)`: the diagonal `Λ`.
    g: Vec<f64>,
    /// `A = I + V Λ⁻¹ Vᵀ = L_a L_aᵀ`; its factor.
    la: Mat<f64>,
    /// `r = ỹ − m`.
    r: Vec<f64>,
    /// `β = L_a⁻¹ V Λ⁻¹ r`.
    be: Vec<f64>,
}

impl FitcEvidence<'_> {
    fn m(&self) -> usize {
        self.inducing.len() / self.states.dim()
    }

    fn inducing_point(&self, i: usize) -> &[f64] {
        let d = self.states.dim();
        &self.inducing[i * d..(i + 1) * d]
    }

    /// `K_uu` and `K_uf` at `hyper`.
    fn kernels(&self, hyper: &Hyper) -> (Mat<f64>, Mat<f64>) {
        let (m, n) = (self.m(), self.states.len());
        let inv = inverse_squares(&hyper.lengths);
        let s = hyper.signal;
        let kuu = Mat::from_fn(m, m, |i, j| {
            let c = correlation(self.inducing_point(i), self.inducing_point(j), &inv);
            s * (c + if i == j { NUGGET } else { 0.0 })
        });
        let kuf = Mat::from_fn(m, n, |i, j| {
            s * correlation(self.inducing_point(i), self.states.position(j), &inv)
        });
        (kuu, kuf)
    }

    /// The factors at `hyper`; `None` where `K_uu` or `A` does not factorize or `Λ` is not
    /// positive.
    fn factor(&self, hyper: &Hyper) -> Option<Factors> {
        let (m, n) = (self.m(), self.states.len());
        let (kuu, kuf) = self.kernels(hyper);
        let luu = kuu.llt(Side::Lower).ok()?;
        let mut v = kuf.clone();
        solve_lower_triangular_in_place(luu.L(), v.as_mut(), Par::rayon(0));
        let diag = hyper.signal * (1.0 + NUGGET) + hyper.noise;
        let g: Vec<f64> = (0..n)
            .map(|j| diag - (0..m).map(|i| v[(i, j)] * v[(i, j)]).sum::<f64>())
            .collect();
        if g.iter().any(|x| x.is_nan() || *x <= 0.0) {
            return None;
        }
        let scaled = Mat::from_fn(m, n, |i, j| v[(i, j)] / g[j].sqrt());
        let mut a = &scaled * scaled.transpose();
        for i in 0..m {
            a[(i, i)] += 1.0;
        }
        let la = a.llt(Side::Lower).ok()?.L().to_owned();
        let r: Vec<f64> = self.values.iter().map(|y| y - hyper.mean).collect();
        let mut be = Mat::<f64>::zeros(m, 1);
        for j in 0..n {
            for i in 0..m {
                be[(i, 0)] += v[(i, j)] * r[j] / g[j];
            }
        }
        solve_lower_triangular_in_place(la.as_ref(), be.as_mut(), Par::Seq);
        let be = (0..m).map(|i| be[(i, 0)]).collect();
        Some(Factors {
            kuu,
            kuf,
            luu,
            v,
            g,
            la,
            r,
            be,
        })
    }
}

/// `−log p(ỹ)`'s derivatives with respect to the kernel's parts: `∂/∂diag K` (`N`),
/// `∂/∂K_uu` (`M × M`), `∂/∂K_uf` (`M × N`), and with respect to the mean.
struct Adjoints {
    diag: Vec<f64>,
    uu: Mat<f64>,
    uf: Mat<f64>,
    mean: f64,
}

impl Factors {
    /// `Σ log diag L_a + ½(Σ log g + N log 2π + rᵀΛ⁻¹r − βᵀβ)`.
    fn negative_log_evidence(&self) -> f64 {
        let n = self.r.len();
        let log_det_a: f64 = (0..self.la.nrows()).map(|i| self.la[(i, i)].ln()).sum();
        let log_g: f64 = self.g.iter().map(|g| g.ln()).sum();
        let fit: f64 = self
            .r
            .iter()
            .zip(&self.g)
            .map(|(r, g)| r * r / g)
            .sum::<f64>()
            - self.be.iter().map(|b| b * b).sum::<f64>();
        log_det_a + 0.5 * (log_g + n as f64 * (2.0 * std::f64::consts::PI).ln() + fit)
    }

    /// GPML's `infFITC` derivatives, gathered into adjoints (see the module docs):
    /// `∂/∂diag K = ½(1/g − e)`, `∂/∂K_uu = ½(wwᵀ − PBᵀ)`, `∂/∂K_uf = P − w alᵀ`, with
    /// `al = (Q + Λ)⁻¹r`, `B = K_uu⁻¹K_uf`, `w = B al`, `W = L_a⁻¹VΛ⁻¹`,
    /// `e = al² + colsum(W²)` and `P = B diag(e) − BWᵀW`.
    fn adjoints(&self) -> Adjoints {
        let (m, n) = (self.v.nrows(), self.v.ncols());
        let mut t = Mat::from_fn(m, 1, |i, _| self.be[i]);
        solve_upper_triangular_in_place(self.la.transpose(), t.as_mut(), Par::Seq);
        let al: Vec<f64> = (0..n)
            .map(|j| {
                (self.r[j] - (0..m).map(|i| self.v[(i, j)] * t[(i, 0)]).sum::<f64>()) / self.g[j]
            })
            .collect();
        // `B = L_u⁻ᵀ V`: one triangular solve, not `K_uu`'s inverse times `K_uf`.
        let mut b = self.v.clone();
        solve_upper_triangular_in_place(self.luu.L().transpose(), b.as_mut(), Par::rayon(0));
        let mut w = vec![0.0; m];
        for j in 0..n {
            for i in 0..m {
                w[i] += b[(i, j)] * al[j];
            }
        }
        let mut big_w = Mat::from_fn(m, n, |i, j| self.v[(i, j)] / self.g[j]);
        solve_lower_triangular_in_place(self.la.as_ref(), big_w.as_mut(), Par::rayon(0));
        let e: Vec<f64> = (0..n)
            .map(|j| al[j] * al[j] + (0..m).map(|i| big_w[(i, j)] * big_w[(i, j)]).sum::<f64>())
            .collect();
        let bwt = &b * big_w.transpose();
        let mut p = -(&bwt * &big_w);
        for j in 0..n {
            for i in 0..m {
                p[(i, j)] += b[(i, j)] * e[j];
            }
        }
        let pbt = &p * b.transpose();
        let uu = Mat::from_fn(m, m, |i, k| 0.5 * (w[i] * w[k] - pbt[(i, k)]));
        let uf = Mat::from_fn(m, n, |i, j| p[(i, j)] - w[i] * al[j]);
        let diag = (0..n).map(|j| 0.5 * (1.0 / self.g[j] - e[j])).collect();
        Adjoints {
            diag,
            uu,
            uf,
            mean: -al.iter().sum::<f64>(),
        }
    }
}

impl Evidence for FitcEvidence<'_> {
    fn count(&self) -> usize {
        Hyper::count(self.states.dim())
    }

    /// The predictive mean at `hyper`, in units of `U`: weights `L_u⁻ᵀ L_a⁻ᵀ β` on the
    /// inducing points. `None` where the factors are.
    fn posterior(&self, hyper: &Hyper, shift: f64, scale: f64) -> Option<Predictor> {
        let f = self.factor(hyper)?;
        let m = self.m();
        let mut alpha = Mat::from_fn(m, 1, |i, _| f.be[i]);
        solve_upper_triangular_in_place(f.la.transpose(), alpha.as_mut(), Par::Seq);
        solve_upper_triangular_in_place(f.luu.L().transpose(), alpha.as_mut(), Par::Seq);
        let weights = (0..m)
            .map(|i| scale * hyper.signal * alpha[(i, 0)])
            .collect();
        Predictor::new(
            self.inducing.to_vec(),
            weights,
            hyper.lengths.clone(),
            shift + scale * hyper.mean,
        )
        .ok()
    }

    fn negative_log_evidence(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let hyper = Hyper::at(theta);
        let Some(f) = self.factor(&hyper) else {
            grad.fill(0.0);
            return f64::INFINITY;
        };
        let value = f.negative_log_evidence();
        let adjoints = f.adjoints();
        self.contract(&hyper, &f, &adjoints, grad);
        value
    }
}

impl FitcEvidence<'_> {
    /// The gradient in `θ` from the adjoints: each kernel part's derivative is itself times
    /// `(zₖ − xₖ)²/ℓₖ²` for `log ℓₖ` and times 2 for `log σ_f`; the noise moves the diagonal
    /// alone, by `2σ_n²`.
    fn contract(&self, hyper: &Hyper, f: &Factors, a: &Adjoints, grad: &mut [f64]) {
        let (m, n, d) = (self.m(), self.states.len(), self.states.dim());
        let inv = inverse_squares(&hyper.lengths);
        grad.fill(0.0);
        let mut signal = 0.0;
        let mut add = |z: &[f64], x: &[f64], weight: f64, grad: &mut [f64]| {
            signal += 2.0 * weight;
            for k in 0..d {
                let dx = z[k] - x[k];
                grad[k] += weight * dx * dx * inv[k];
            }
        };
        for j in 0..n {
            let x = self.states.position(j);
            for i in 0..m {
                add(
                    self.inducing_point(i),
                    x,
                    a.uf[(i, j)] * f.kuf[(i, j)],
                    grad,
                );
            }
        }
        for k in 0..m {
            for i in 0..m {
                add(
                    self.inducing_point(i),
                    self.inducing_point(k),
                    a.uu[(i, k)] * f.kuu[(i, k)],
                    grad,
                );
            }
        }
        let diag_k = hyper.signal * (1.0 + NUGGET);
        let diag_sum: f64 = a.diag.iter().sum();
        grad[d] = signal + 2.0 * diag_k * diag_sum;
        grad[d + 1] = 2.0 * hyper.noise * diag_sum;
        grad[d + 2] = a.mean;
    }
}
