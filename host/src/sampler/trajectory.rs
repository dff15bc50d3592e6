//! How long surrogate trajectories are: a multiple of the exact phase's, or the range of lengths
//! the surrogate's own curvature predicts mixes best.
//!
//! A surrogate leapfrog step costs a small fraction of the exact `U` that every MH step needs,
//! so the trajectory length is free to be the one that mixes best rather than the one the exact
//! phase could afford. Near a Gaussian, HMC rotates each eigen-direction of the precision (in
//! the metric's units) at its own frequency `ω`: a leapfrog step of size `ε` turns the phase by
//! `θ = 2 asin(εω/2)`, and an accepted move of `L` steps, `x' = x cos(Lθ) + p sin(Lθ)` with a
//! fresh standard normal `p`, leaves lag-1 autocorrelation `cos(Lθ)` in that coordinate and
//! `cos²(Lθ) = (1 + cos(2Lθ))/2` in its square (`Cov(x², x'²) = 2cos²(Lθ)`, `Var(x²) = 2`): a
//! coordinate can be antithetic, its square never. A rejection keeps the state, so with
//! acceptance `a` the chain's lag-1 autocorrelation is `ρ = a·E[cos(Lθ)] + (1 − a)` (and the
//! same with `cos²` for the square), and an AR(1) chain's ESS per draw is `(1 − ρ)/(1 + ρ)`:
//! above 1 for a coordinate whose moves are antithetic, at most `a/(2 − a)` for its square, at
//! quarter turns.
//!
//! [`choose_steps`] takes the frequencies from the surrogate's Hessian at each of a few training
//! states (a posterior whose curvature changes from place to place, as the banana's does along
//! its arms, has every one of them to cover, not their average's), and among the ranges
//! `min..=max` (up to a cap) picks the one whose *worst* predicted
//! ESS per draw, over every direction and both moments, is largest, also under frequencies up
//! to 15% off (the surrogate and the Gaussian picture are approximations; the errors are tried
//! densely, and no range is longer than they resolve, so that a long trajectory cannot pass by
//! landing well at the errors tried and badly between them); the shortest range within 5% of
//! that best. Both moments matter: a length that only made the coordinates antithetic
//! would raise the ESS of means (bulk) and lower that of variances and quantiles (tail).
//! Everything is computed from the fitted surrogate, so the choice is reproducible.

use nalgebra::{DMatrix, SymmetricEigen};
use serde::{Deserialize, Serialize};
use shmc_core::Steps;

use crate::surrogates::Curvature;
use crate::surrogates::states::TrainingSet;

/// How many times the exact phase's longest trajectory the chosen range may reach.
pub const AUTO_CAP_FACTOR: u32 = 8;

/// Training states whose surrogate Hessians give the frequencies.
const CURVATURE_STATES: usize = 16;

/// Relative errors of the frequencies a choice must also hold up under: 0.85 to 1.15 in steps
/// of 0.025. Three of them (0.85, 1, 1.15) let the choice pick 122 steps of a quarter turn each
/// on a standard normal, whose phases happened to land well at those three frequencies.
const FREQUENCY_ERRORS: [f64; 13] = [
    0.85, 0.875, 0.9, 0.925, 0.95, 0.975, 1.0, 1.025, 1.05, 1.075, 1.1, 1.125, 1.15,
];

/// The acceptance assumed for the surrogate's proposals (what the step size was adapted to).
const ASSUMED_ACCEPTANCE: f64 = 0.8;

/// How surrogate trajectories relate to the exact phase's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurrogateSteps {
    /// `K` times the exact phase's number of steps (the papers: 1).
    Factor(u32),
    /// The range [`choose_steps`] predicts mixes best, up to [`AUTO_CAP_FACTOR`] times the
    /// exact phase's longest trajectory.
    Auto,
    /// No fixed length: NUTS on the surrogate, its draws judged by delayed acceptance (one
    /// exact `U` per draw; see `chain::delayed_nuts`).
    Nuts,
}

/// `steps` with every trajectory length multiplied by `factor`.
pub fn lengthen(steps: Steps, factor: u32) -> Steps {
    match steps {
        Steps::Fixed(n) => Steps::Fixed(n * factor),
        Steps::Jittered(n) => Steps::Jittered(n * factor),
        Steps::Between(lo, hi) => Steps::Between(lo * factor, hi * factor),
    }
}

/// The chosen range and the ESS per draw it is predicted to give in its worst direction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryChoice {
    /// The trajectory lengths.
    #[serde(with = "super::chain::checkpoint::StepsRecord")]
    pub steps: Steps,
    /// The smallest predicted ESS per draw over directions, moments and frequency errors.
    pub predicted_ess_per_draw: f64,
}

impl std::fmt::Display for TrajectoryChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}..={} steps chosen from the surrogate's curvature (worst predicted ESS per draw {:.2})",
            self.steps.min(),
            self.steps.max(),
            self.predicted_ess_per_draw
        )
    }
}

/// The range of trajectory lengths, at most `cap` steps, that the surrogate's curvature predicts
/// mixes best (see the module docs), for a diagonal metric `M⁻¹ = diag(inv_mass)` and step size
/// `step_size`. `None` when the curvature is not positive definite or the step size is unstable
/// in some direction: the Gaussian picture does not apply.
pub fn choose_steps(
    curvature: &dyn Curvature,
    states: &TrainingSet,
    inv_mass: &[f64],
    step_size: f64,
    cap: u32,
) -> Option<TrajectoryChoice> {
    let frequencies = frequencies(curvature, states, inv_mass)?;
    let cap = cap.min(resolved_steps(&frequencies, step_size)).max(1);
    let spectrum = Spectrum::new(&frequencies, step_size, cap)?;
    let scored: Vec<(u32, u32, f64)> = (1..=cap)
        .flat_map(|lo| (lo..=cap).map(move |hi| (lo, hi)))
        .map(|(lo, hi)| (lo, hi, spectrum.worst_ess(lo, hi)))
        .collect();
    let best = scored.iter().map(|s| s.2).fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi, worst) = scored
        .into_iter()
        .filter(|s| s.2 >= 0.95 * best)
        .min_by_key(|&(lo, hi, _)| (lo + hi, hi))?;
    Some(TrajectoryChoice {
        steps: Steps::Between(lo, hi),
        predicted_ess_per_draw: worst,
    })
}

/// The phase between neighbouring [`FREQUENCY_ERRORS`] that a trajectory may reach: an eighth
/// of a turn, so that wherever a frequency error between them puts the phase, one of them lies
/// within a sixteenth of a turn of it.
const RESOLVED_PHASE: f64 = std::f64::consts::FRAC_PI_4;

/// The longest trajectory the frequency errors resolve: `L` steps turn a direction by `Lθ`,
/// and neighbouring errors 0.025 apart by phases about `0.025·Lθ` apart; beyond
/// [`RESOLVED_PHASE`] the worst case can fall between them. On Bank Marketing (cap 360) the
/// choice took 348 steps, predicted 0.59 per draw at the 13 errors against 0.53 for 5 steps,
/// and spent 70 times the surrogate's work per iteration for phases that landed well only at
/// those 13 (its all-in row: 527 ESS/s, against 854 with 5 steps).
fn resolved_steps(frequencies: &[f64], step_size: f64) -> u32 {
    let spacing = FREQUENCY_ERRORS[1] - FREQUENCY_ERRORS[0];
    let widest = FREQUENCY_ERRORS[FREQUENCY_ERRORS.len() - 1];
    let fastest = frequencies.iter().copied().fold(0.0, f64::max);
    let half = (0.5 * step_size * fastest * widest).min(1.0);
    let theta = 2.0 * half.asin();
    (RESOLVED_PHASE / (spacing * theta))
        .floor()
        .clamp(1.0, u32::MAX as f64) as u32
}

/// For each frequency error and direction, the prefix sums over `L = 0..=cap` of `cos(Lθ)` and
/// `cos²(Lθ)`: the mean over any range of lengths is then a difference of two entries.
struct Spectrum {
    sums: Vec<(Vec<f64>, Vec<f64>)>,
}

impl Spectrum {
    /// The tables for `frequencies` at `step_size` up to `cap ≥ 1` steps; `None` if the
    /// leapfrog is unstable in some direction (`εω ≥ 2`) with any of the frequency errors.
    fn new(frequencies: &[f64], step_size: f64, cap: u32) -> Option<Self> {
        Self::with_errors(frequencies, step_size, cap, &FREQUENCY_ERRORS)
    }

    /// As [`Spectrum::new`], under the relative frequency errors `errors`.
    fn with_errors(frequencies: &[f64], step_size: f64, cap: u32, errors: &[f64]) -> Option<Self> {
        let cap = cap as usize;
        let mut sums = Vec::with_capacity(errors.len() * frequencies.len());
        for &error in errors {
            for &omega in frequencies {
                let half = 0.5 * step_size * omega * error;
                if half >= 1.0 {
                    return None;
                }
                let theta = 2.0 * half.asin();
                let (mut c1, mut c2) = (vec![0.0; cap + 1], vec![0.0; cap + 1]);
                for l in 1..=cap {
                    let phase = l as f64 * theta;
                    c1[l] = c1[l - 1] + phase.cos();
                    c2[l] = c2[l - 1] + phase.cos().powi(2);
                }
                sums.push((c1, c2));
            }
        }
        Some(Self { sums })
    }

    /// The smallest predicted ESS per draw of trajectories uniform on `lo..=hi` (within the
    /// cap), over directions, frequency errors and both moments.
    fn worst_ess(&self, lo: u32, hi: u32) -> f64 {
        let (lo, hi) = (lo as usize, hi as usize);
        let n = (hi - lo + 1) as f64;
        let ess = |mean_cos: f64| {
            let rho = ASSUMED_ACCEPTANCE * mean_cos + (1.0 - ASSUMED_ACCEPTANCE);
            (1.0 - rho) / (1.0 + rho)
        };
        self.sums
            .iter()
            .map(|(c1, c2)| {
                let linear = ess((c1[hi] - c1[lo - 1]) / n);
                let square = ess((c2[hi] - c2[lo - 1]) / n);
                linear.min(square)
            })
            .fold(f64::INFINITY, f64::min)
    }
}

/// Frequencies closer than this, relatively, are one for the choice (a near-Gaussian
/// posterior's are nearly the same at every state).
const MERGED_FREQUENCIES: f64 = 0.01;

/// The frequencies `ω` of the surrogate's Hessian at [`CURVATURE_STATES`] training states, in
/// the metric's units: the square roots of the eigenvalues of `D^½ H(q) D^½` with
/// `D = diag(inv_mass)`, those within [`MERGED_FREQUENCIES`] of each other merged. A state
/// where the Hessian is not positive definite (a saddle between a banana's arms) has no
/// oscillation to predict and is left out; `None` when every state is such, or none is given.
fn frequencies(
    curvature: &dyn Curvature,
    states: &TrainingSet,
    inv_mass: &[f64],
) -> Option<Vec<f64>> {
    let d = inv_mass.len();
    if states.is_empty() || states.dim() != d {
        return None;
    }
    let picks = CURVATURE_STATES.min(states.len());
    let mut hessian = vec![0.0; d * d];
    let mut all = Vec::with_capacity(picks * d);
    for k in 0..picks {
        curvature.hessian(states.position(k * states.len() / picks), &mut hessian);
        let scaled = DMatrix::from_fn(d, d, |i, j| {
            let h = 0.5 * (hessian[i + j * d] + hessian[j + i * d]);
            h * (inv_mass[i] * inv_mass[j]).sqrt()
        });
        let eigenvalues = SymmetricEigen::new(scaled).eigenvalues;
        if eigenvalues.iter().all(|&l| l.is_finite() && l > 0.0) {
            all.extend(eigenvalues.iter().map(|l| l.sqrt()));
        }
    }
    all.sort_by(f64::total_cmp);
    let mut merged: Vec<f64> = Vec::new();
    for omega in all {
        match merged.last() {
            Some(&last) if omega <= last * (1.0 + MERGED_FREQUENCIES) => {}
            _ => merged.push(omega),
        }
    }
    (!merged.is_empty()).then_some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surrogates::network::{DynNetwork, Scale, TrainOptions, fit_score};
    use shmc_core::random::fill_standard_normal;

    /// A network score-matched to a standard Gaussian in `d` dimensions scaled by `sd`.
    fn gaussian_surrogate(d: usize, sd: f64) -> (DynNetwork, TrainingSet) {
        let mut rng = crate::random::chain_rng(3, 1);
        let mut set = TrainingSet::new(d);
        let mut q = vec![0.0; d];
        for _ in 0..400 {
            fill_standard_normal(&mut rng, &mut q);
            q.iter_mut().for_each(|x| *x *= sd);
            let gradient: Vec<f64> = q.iter().map(|x| x / (sd * sd)).collect();
            let u = q.iter().map(|x| x * x).sum::<f64>() / (2.0 * sd * sd);
            set.push(&q, u, Some(&gradient));
        }
        let options = TrainOptions {
            hidden: 300,
            scale: Scale::Fixed(8.0),
            seed: 2,
            ..TrainOptions::default()
        };
        (fit_score(&set, &options).unwrap().network, set)
    }

    /// On a Gaussian (frequency 1 in the metric's units) the chosen integration time lies where
    /// both the coordinates and their squares are antithetic, `εL` inside `(π/2, 3π/4)` on
    /// average, and it is predicted to mix better than the papers' jittered `1..=L` at any `L`
    /// up to the cap (by 15% here, in the worst case of the frequency errors); the same
    /// posterior in other units, with the metric that undoes them, gets the same choice.
    #[test]
    fn a_gaussian_gets_antithetic_trajectories_whatever_its_units() {
        let (eps, cap) = (0.3, 48);
        let (network, set) = gaussian_surrogate(4, 1.0);
        let unit = choose_steps(&network, &set, &[1.0; 4], eps, cap).unwrap();
        let Steps::Between(lo, hi) = unit.steps else {
            panic!("{unit:?}")
        };
        let time = eps * (lo + hi) as f64 / 2.0;
        let (quarter, pi) = (std::f64::consts::FRAC_PI_4, std::f64::consts::PI);
        assert!(
            time > 0.5 * pi && time < 3.0 * quarter,
            "{unit:?}, time {time}"
        );
        let spectrum = Spectrum::new(&[1.0; 4], eps, cap).unwrap();
        let jittered = (1..=cap)
            .map(|l| spectrum.worst_ess(1, l))
            .fold(0.0, f64::max);
        assert!(
            unit.predicted_ess_per_draw > 1.1 * jittered,
            "{unit:?} against {jittered} for the best 1..=L"
        );

        let (network, set) = gaussian_surrogate(4, 0.05);
        let scaled = choose_steps(&network, &set, &[0.0025; 4], eps, 48).unwrap();
        assert_eq!(scaled.steps, unit.steps);
    }

    /// With room for trajectories far longer than the frequency errors resolve, the choice
    /// stays within what they do, and its predicted worst case holds between them: checked
    /// on errors ten times as dense, the worst is at least 0.9 of the prediction.
    #[test]
    fn a_long_cap_does_not_buy_phases_that_land_well_only_at_the_errors() {
        let (eps, cap) = (0.356, 360);
        let (network, set) = gaussian_surrogate(4, 1.0);
        let choice = choose_steps(&network, &set, &[1.0; 4], eps, cap).unwrap();
        let (lo, hi) = (choice.steps.min(), choice.steps.max());
        let frequencies = frequencies(&network, &set, &[1.0; 4]).unwrap();
        assert!(hi <= resolved_steps(&frequencies, eps), "{choice:?}");
        let dense: Vec<f64> = (0..=120).map(|k| 0.85 + 0.0025 * k as f64).collect();
        let spectrum = Spectrum::with_errors(&frequencies, eps, hi, &dense).unwrap();
        let worst = spectrum.worst_ess(lo, hi);
        assert!(
            worst >= 0.9 * choice.predicted_ess_per_draw,
            "{choice:?}: {worst} between the errors"
        );
    }

    /// A step size beyond the leapfrog's stability limit (εω ≥ 2) gives no choice.
    #[test]
    fn an_unstable_step_size_gives_no_choice() {
        let (network, set) = gaussian_surrogate(3, 1.0);
        assert!(choose_steps(&network, &set, &[1.0; 3], 2.5, 48).is_none());
    }
}
