//! The leapfrog (velocity Verlet) integrator, driven by any proposal potential.
//!
//! Each step is a half kick, a full drift, a half kick. The gradient at the start point is
//! passed in (cached from the previous step or transition), so a trajectory of `n` steps costs
//! exactly `n` proposal gradients; the last one comes with the exact `U` at the end point
//! through [`Dynamics::end_point`].

use crate::linalg::axpy_finite;
use crate::metric::Metric;
use crate::potential::Dynamics;
use crate::real::Real;

/// Integrates `n ≥ 1` leapfrog steps of size `eps` in place.
///
/// On entry `grad` holds the proposal gradient at `q`; on exit `q`, `p` and `grad` hold the end
/// point, and the exact `U` there is returned. If a gradient or a position turns non-finite the
/// trajectory stops early and `NaN` is returned: the caller rejects it as divergent.
///
/// Between two gradients, one step's closing half kick and the next step's half kick and drift
/// are one [`Metric::kick_kick_drift`], so that a fused metric keeps `p` in a register from the
/// gradient to the next position (the same operations in the same order as step after step).
/// Those steps read the gradient in place where the proposal stores it
/// ([`Dynamics::proposal_gradient_ref`]); `grad` is written only at the end point.
pub fn leapfrog<T, Dy, M>(
    dynamics: &Dy,
    metric: &M,
    eps: T,
    n: u32,
    q: &mut [T],
    p: &mut [T],
    grad: &mut [T],
) -> T
where
    T: Real,
    Dy: Dynamics<T> + ?Sized,
    M: Metric<T> + ?Sized,
{
    let half = T::of(0.5) * eps;
    if n == 0 || !metric.kick_drift(half, eps, grad, p, q) {
        return T::of(f64::NAN);
    }
    for _ in 1..n {
        let grad = dynamics.proposal_gradient_ref(q, grad);
        if !metric.kick_kick_drift(half, eps, grad, p, q) {
            return T::of(f64::NAN);
        }
    }
    let end_potential = dynamics.end_point(q, grad);
    // The closing half kick, checking the new gradient in the same pass.
    if !axpy_finite(-half, grad, p) {
        return T::of(f64::NAN);
    }
    end_potential
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::{DiagonalMetric, IdentityMetric};
    use crate::potential::{Exact, Potential};
    use nalgebra::Vector2;

    /// A correlated 2-D Gaussian: U(q) = ½ qᵀAq.
    struct Quadratic([[f64; 2]; 2]);

    impl Potential for Quadratic {
        fn dim(&self) -> usize {
            2
        }
        fn value(&self, q: &[f64]) -> f64 {
            let a = &self.0;
            0.5 * (a[0][0] * q[0] * q[0] + 2.0 * a[0][1] * q[0] * q[1] + a[1][1] * q[1] * q[1])
        }
        fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
            let a = &self.0;
            g[0] = a[0][0] * q[0] + a[0][1] * q[1];
            g[1] = a[1][0] * q[0] + a[1][1] * q[1];
            self.value(q)
        }
    }

    fn quad() -> Quadratic {
        Quadratic([[2.0, 0.6], [0.6, 1.0]])
    }

    #[test]
    fn reversing_momentum_retraces_the_trajectory() {
        let u = quad();
        let metric = DiagonalMetric::new(Vector2::new(0.7, 1.3)).unwrap();
        let (q0, p0) = ([0.3, -1.2], [1.1, 0.4]);
        let (mut q, mut p, mut g) = (q0, p0, [0.0; 2]);
        u.gradient(&q, &mut g);
        leapfrog(&Exact(&u), &metric, 0.1, 25, &mut q, &mut p, &mut g);
        p.iter_mut().for_each(|x| *x = -*x);
        leapfrog(&Exact(&u), &metric, 0.1, 25, &mut q, &mut p, &mut g);
        for i in 0..2 {
            assert!((q[i] - q0[i]).abs() < 1e-12, "q {q:?}");
            assert!((-p[i] - p0[i]).abs() < 1e-12, "p {p:?}");
        }
    }

    /// Energy error after a fixed integration time T = nε.
    fn energy_error(eps: f64) -> f64 {
        let u = quad();
        let metric = IdentityMetric;
        let (mut q, mut p, mut g) = ([0.3, -1.2], [1.1, 0.4], [0.0; 2]);
        let h0 = u.value(&q) + metric.kinetic(&p);
        u.gradient(&q, &mut g);
        let n = (1.0 / eps).round() as u32;
        let u1 = leapfrog(&Exact(&u), &metric, eps, n, &mut q, &mut p, &mut g);
        (u1 + metric.kinetic(&p) - h0).abs()
    }

    #[test]
    fn energy_error_shrinks_as_step_size_squared() {
        let (e1, e2, e3) = (energy_error(0.1), energy_error(0.05), energy_error(0.025));
        // Halving ε divides a second-order error by about 4.
        for (big, small) in [(e1, e2), (e2, e3)] {
            let ratio = big / small;
            assert!(
                (3.0..5.0).contains(&ratio),
                "ratio {ratio} ({e1}, {e2}, {e3})"
            );
        }
    }

    /// A metric that makes the leapfrog's three passes ([`Metric::kick_drift`]'s default).
    struct Unfused<'a>(&'a DiagonalMetric<nalgebra::Dyn>);

    impl Metric for Unfused<'_> {
        fn kick_drift(&self, half: f64, eps: f64, g: &[f64], p: &mut [f64], q: &mut [f64]) -> bool {
            // The trait's default, spelled out here so that the test does not depend on it.
            crate::linalg::axpy(-half, g, p);
            self.drift(eps, p, q);
            crate::linalg::all_finite(q)
        }
        fn kinetic(&self, p: &[f64]) -> f64 {
            self.0.kinetic(p)
        }
        fn drift(&self, eps: f64, p: &[f64], q: &mut [f64]) {
            self.0.drift(eps, p, q)
        }
        fn draw_momentum<R: rand_core::Rng + ?Sized>(&self, rng: &mut R, p: &mut [f64]) {
            self.0.draw_momentum(rng, p)
        }
    }

    /// `U(q) = Σ (k + 1) q_k² + q₀⁴`: anharmonic, so rounding differences would grow.
    struct Bowl(usize);

    impl Potential for Bowl {
        fn dim(&self) -> usize {
            self.0
        }
        fn value(&self, q: &[f64]) -> f64 {
            let s: f64 = q
                .iter()
                .enumerate()
                .map(|(k, x)| (k + 1) as f64 * x * x)
                .sum();
            s + q[0].powi(4)
        }
        fn value_and_gradient(&self, q: &[f64], g: &mut [f64]) -> f64 {
            for (k, gk) in g.iter_mut().enumerate() {
                *gk = 2.0 * (k + 1) as f64 * q[k];
            }
            g[0] += 4.0 * q[0].powi(3);
            self.value(q)
        }
    }

    /// The diagonal metric's fused kick and drift (and kick, kick and drift between two
    /// gradients) make the very trajectories of the separate passes, bit for bit, in every
    /// dimension (end point, momentum, gradient and `U`), and stop a trajectory whose position
    /// overflows the same way.
    #[test]
    fn fused_kick_and_drift_are_the_three_passes_bit_for_bit() {
        let mut rng = crate::random::SplitMix64(11);
        for d in 1..=7 {
            let inv_mass: nalgebra::DVector<f64> =
                nalgebra::DVector::from_fn(d, |k, _| 0.3 + 0.4 * k as f64);
            let metric = DiagonalMetric::new(inv_mass).unwrap();
            for trial in 0..20 {
                let mut q0 = std::vec![0.0; d];
                let mut p0 = std::vec![0.0; d];
                crate::random::fill_standard_normal(&mut rng, &mut q0);
                crate::random::fill_standard_normal(&mut rng, &mut p0);
                if trial == 0 {
                    // The first drift leaves the finite numbers: both stop there with NaN.
                    q0[0] = f64::MAX;
                }
                let run = |fused: bool| {
                    let (mut q, mut p, mut g) = (q0.clone(), p0.clone(), std::vec![0.0; d]);
                    Bowl(d).gradient(&q, &mut g);
                    let u = if fused {
                        leapfrog(&Exact(Bowl(d)), &metric, 0.07, 9, &mut q, &mut p, &mut g)
                    } else {
                        let unfused = Unfused(&metric);
                        leapfrog(&Exact(Bowl(d)), &unfused, 0.07, 9, &mut q, &mut p, &mut g)
                    };
                    let bits =
                        |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<std::vec::Vec<_>>();
                    (u.to_bits(), bits(&q), bits(&p), bits(&g))
                };
                let fused = run(true);
                assert_eq!(fused, run(false), "d = {d}, trial {trial}");
                assert_eq!(f64::from_bits(fused.0).is_nan(), trial == 0);
            }
        }
    }

    #[test]
    fn non_finite_gradient_stops_the_trajectory() {
        struct Broken;
        impl Potential for Broken {
            fn dim(&self) -> usize {
                1
            }
            fn value(&self, _: &[f64]) -> f64 {
                f64::NAN
            }
            fn value_and_gradient(&self, _: &[f64], g: &mut [f64]) -> f64 {
                g[0] = f64::NAN;
                f64::NAN
            }
        }
        let (mut q, mut p, mut g) = ([0.0], [1.0], [0.0]);
        let u = leapfrog(
            &Exact(Broken),
            &IdentityMetric,
            0.1,
            5,
            &mut q,
            &mut p,
            &mut g,
        );
        assert!(u.is_nan());
    }
}
