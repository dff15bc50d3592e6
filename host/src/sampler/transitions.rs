//! How many surrogate transitions run between two exact judgements ([`Transitions`]): the same
//! `k` throughout, a warmup `k` and a sampling `k`, or `auto`, which picks the sampling `k`
//! from what the chain measured in its warmup ([`choose_k`]).
//!
//! Why the chain stays exact under `auto`: the sampling `k` is chosen once, at the end of
//! warmup (when the step size and metric adapt for the last time), from warmup's timings and
//! acceptance, never from the state; every kept draw is then made by one fixed kernel, `K̃ᵏ`
//! judged by the exact `U`, which is reversible for the posterior as any fixed `k` is. Timing
//! makes the choice machine-dependent, so the chain reports the resolved `W:S`, and a rerun
//! with `W:S` makes the same draws bit for bit.

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The warmup `k` under `auto`: 1, so that warmup costs what a single judged surrogate
/// transition costs (the step size adapts on it as on any `k`), and so that its acceptance is
/// the one-transition acceptance the rule's second term is written for.
pub const AUTO_WARMUP: u32 = 1;

/// The largest sampling `k` `auto` picks: past it a judgement's surrogate work is a trajectory
/// of hundreds of leapfrog steps for one draw, and a worse surrogate than measured in warmup
/// (far in a tail) would be paid for twenty times.
pub const AUTO_MAX: u32 = 20;

/// Surrogate transitions between two exact judgements, in warmup and while sampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transitions {
    /// `warmup` transitions per judgement during warmup, `sampling` for the kept draws.
    Fixed {
        /// Transitions per judgement in warmup.
        warmup: u32,
        /// Transitions per judgement for the kept draws.
        sampling: u32,
    },
    /// [`AUTO_WARMUP`] during warmup, then the sampling `k` [`choose_k`] picks from warmup's
    /// measurements.
    Auto,
}

impl Transitions {
    /// The same `k` throughout.
    pub fn fixed(k: u32) -> Self {
        Transitions::Fixed {
            warmup: k,
            sampling: k,
        }
    }

    /// Reads `K`, `W:S` or `auto`; anything else (a zero, a sign, `auto:3`) is refused naming
    /// the setting.
    pub fn parse(text: &str) -> Result<Self> {
        let refuse = |why: &str| {
            Error::setting(
                "surrogate_transitions",
                format!(
                    "takes K, W:S (warmup:sampling) or auto, each k at least 1: {text:?} {why}"
                ),
            )
        };
        if text == "auto" {
            return Ok(Transitions::Auto);
        }
        let k = |part: &str| match part.parse::<u32>() {
            Ok(0) => Err(refuse("has a k of 0")),
            Ok(k) if part.bytes().all(|b| b.is_ascii_digit()) => Ok(k),
            _ => Err(refuse("is not of that form")),
        };
        match text.split_once(':') {
            None => Ok(Self::fixed(k(text)?)),
            Some((w, s)) => Ok(Transitions::Fixed {
                warmup: k(w)?,
                sampling: k(s)?,
            }),
        }
    }

    /// The `k` warmup runs.
    pub fn warmup(&self) -> u32 {
        match *self {
            Transitions::Fixed { warmup, .. } => warmup,
            Transitions::Auto => AUTO_WARMUP,
        }
    }
}

impl fmt::Display for Transitions {
    /// `K` when warmup and sampling share it (as the setting was written before `W:S`), else
    /// `W:S`, or `auto`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Transitions::Fixed { warmup, sampling } if warmup == sampling => write!(f, "{warmup}"),
            Transitions::Fixed { warmup, sampling } => write!(f, "{warmup}:{sampling}"),
            Transitions::Auto => f.write_str("auto"),
        }
    }
}

/// The sampling `k` for a judgement that costs `t_u` seconds, a surrogate transition that
/// costs `t_tr` seconds, and a one-transition exact acceptance `a`:
/// `clamp(min(round(t_u / t_tr), round(−1 / ln a)), 1, AUTO_MAX)`.
///
/// Why: the first term spends about one exact `U`'s time on surrogate work per judgement
/// (more would make the surrogate, not the model, the cost of a draw); the second stops `k`
/// where `aᵏ` falls below `1/e`, past which the end point is rarely accepted. Edges: `a = 1`
/// leaves only the cost term, `a = 0` gives 1, a free surrogate transition (`t_tr = 0`)
/// leaves only the acceptance term; a measurement that is missing or not a number gives 1
/// (what warmup ran).
pub fn choose_k(t_u: f64, t_tr: f64, a: f64) -> u32 {
    // Comparisons with NaN are false: a missing measurement is refused here.
    if !(t_u >= 0.0 && t_tr >= 0.0 && (0.0..=1.0).contains(&a)) {
        return 1;
    }
    let cost = if t_u == 0.0 { 0.0 } else { t_u / t_tr };
    let acceptance = if a >= 1.0 {
        f64::INFINITY
    } else {
        -1.0 / a.ln()
    };
    // Both terms are in [0, ∞]: the clamp bounds an infinity, and `as` takes a whole number.
    cost.min(acceptance).round().clamp(1.0, f64::from(AUTO_MAX)) as u32
}

/// What `auto` measured in warmup: the exact judgements' time, the surrogate transitions' time
/// and the judgements' acceptance, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Seconds spent in exact `U` evaluations judging end points.
    pub exact_seconds: f64,
    /// Exact judgements made.
    pub judgements: u64,
    /// Seconds spent in surrogate transitions.
    pub transition_seconds: f64,
    /// Surrogate transitions made.
    pub transitions: u64,
    /// The second stage's acceptance probabilities summed, over `decisions` (a first stage
    /// that stayed where it began is a decision with probability 1 and no judgement).
    pub accept_sum: f64,
    /// Second-stage decisions made.
    pub decisions: u64,
}

impl Measured {
    /// Seconds per exact judgement (`NaN` when none was made).
    pub fn t_u(&self) -> f64 {
        self.exact_seconds / self.judgements as f64
    }

    /// Seconds per surrogate transition (`NaN` when none was made).
    pub fn t_tr(&self) -> f64 {
        self.transition_seconds / self.transitions as f64
    }

    /// The mean one-stage exact acceptance (`NaN` when none was decided).
    pub fn acceptance(&self) -> f64 {
        self.accept_sum / self.decisions as f64
    }

    /// Adds `k` surrogate transitions begun at `clock` (`None`: not timed).
    pub fn transitions_ran(&mut self, clock: Option<Instant>, k: u32) {
        if let Some(clock) = clock {
            self.transition_seconds += clock.elapsed().as_secs_f64();
            self.transitions += u64::from(k);
        }
    }

    /// Adds an exact judgement begun at `clock` that accepted with probability `p`.
    pub fn judged(&mut self, clock: Option<Instant>, p: f64) {
        if let Some(clock) = clock {
            self.exact_seconds += clock.elapsed().as_secs_f64();
            self.judgements += 1;
        }
        self.decided(p);
    }

    /// Adds a decision with probability `p` (1 when the first stage stayed: nothing to judge).
    pub fn decided(&mut self, p: f64) {
        self.accept_sum += p;
        self.decisions += 1;
    }

    /// [`choose_k`] of these measurements.
    pub fn choose(&self) -> u32 {
        choose_k(self.t_u(), self.t_tr(), self.acceptance())
    }
}

/// The transitions a chain ran, resolved: warmup's `k`, sampling's, and, under `auto`, what
/// the choice was made from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chosen {
    /// Transitions per judgement in warmup.
    pub warmup: u32,
    /// Transitions per judgement for the kept draws.
    pub sampling: u32,
    /// Under `auto`, what warmup measured.
    pub measured: Option<Measured>,
}

impl Chosen {
    /// The setting that reruns these draws: `W:S`.
    pub fn setting(&self) -> String {
        format!("{}:{}", self.warmup, self.sampling)
    }

    /// `W:S`, and under `auto` what it was chosen from, for a file's comment and a report.
    pub fn describe(&self) -> String {
        match &self.measured {
            None => self.setting(),
            Some(m) => format!(
                "{} (auto: t_U {:.3e} s, t_tr {:.3e} s, exact acceptance {:.3} over {} warmup \
                 judgements)",
                self.setting(),
                m.t_u(),
                m.t_tr(),
                m.acceptance(),
                m.decisions
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_k_warmup_sampling_and_auto() {
        assert_eq!(Transitions::parse("3").unwrap(), Transitions::fixed(3));
        let pair = Transitions::parse("1:6").unwrap();
        assert_eq!(
            pair,
            Transitions::Fixed {
                warmup: 1,
                sampling: 6
            }
        );
        assert_eq!(Transitions::parse("auto").unwrap(), Transitions::Auto);
        for (text, shown) in [("3", "3"), ("1:6", "1:6"), ("4:4", "4"), ("auto", "auto")] {
            assert_eq!(Transitions::parse(text).unwrap().to_string(), shown);
        }
        assert_eq!(Transitions::Auto.warmup(), AUTO_WARMUP);
        assert_eq!(pair.warmup(), 1);
    }

    #[test]
    fn refuses_zero_and_other_forms_naming_the_setting() {
        for text in [
            "0", "3:0", "0:3", "x", "auto:3", "", "3:", ":3", "+3", "-1", "1:2:3",
        ] {
            match Transitions::parse(text) {
                Err(Error::Setting { setting, problem }) => {
                    assert_eq!(setting, "surrogate_transitions");
                    assert!(problem.contains(&format!("{text:?}")), "{problem}");
                    assert!(!problem.contains('\n'), "{problem}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_rule_takes_the_smaller_term_clamped() {
        // Cost: a U of 10 ms against transitions of 1 ms; acceptance 0.95 → −1/ln 0.95 ≈ 19.5.
        assert_eq!(choose_k(0.010, 0.001, 0.95), 10);
        // Acceptance 0.7 → −1/ln 0.7 ≈ 2.8: the acceptance term binds.
        assert_eq!(choose_k(0.010, 0.001, 0.7), 3);
        // A surrogate transition dearer than U: one.
        assert_eq!(choose_k(0.001, 0.004, 0.99), 1);
        // A huge cost ratio and a near-perfect surrogate: the cap.
        assert_eq!(choose_k(1.0, 1e-6, 0.999), AUTO_MAX);
    }

    #[test]
    fn the_rule_is_finite_at_its_edges() {
        assert_eq!(
            choose_k(0.010, 0.001, 1.0),
            10,
            "a = 1: the cost term alone"
        );
        assert_eq!(
            choose_k(1.0, 1e-9, 1.0),
            AUTO_MAX,
            "a = 1 and a free surrogate"
        );
        assert_eq!(choose_k(0.010, 0.001, 0.0), 1, "a = 0");
        assert_eq!(
            choose_k(0.010, 0.0, 0.9),
            9,
            "t_tr = 0: the acceptance term"
        );
        assert_eq!(choose_k(0.0, 0.0, 1.0), 1, "nothing measured");
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let k = choose_k(bad, 0.001, 0.9);
            assert!((1..=AUTO_MAX).contains(&k), "{bad}: {k}");
            assert_eq!(choose_k(0.01, 0.001, bad), 1, "a = {bad}");
        }
        assert_eq!(Measured::default().choose(), 1, "no warmup judgements");
    }
}
