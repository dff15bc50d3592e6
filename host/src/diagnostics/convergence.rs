//! Whether a run's draws can be trusted, as CmdStan's `diagnose` and PyMC judge it: split R̂
//! above 1.01, bulk or tail ESS below 100 per chain, divergent transitions, trajectories that hit
//! the tree depth limit, and an energy Bayesian fraction of missing information (E-BFMI) below
//! 0.3. Each failed check is one [`Warning`] that names the parameters or chains at fault and
//! what to try; a run that passes every check has none.

use super::ParameterSummary;

/// R̂ above this says the chains have not mixed (Vehtari et al. 2021).
pub const RHAT_LIMIT: f64 = 1.01;
/// Bulk and tail ESS below this many per chain are too few for a trustworthy MCSE.
pub const ESS_PER_CHAIN: f64 = 100.0;
/// E-BFMI below this says momentum resampling cannot move the chain across energy levels
/// (Betancourt 2016).
pub const EBFMI_LIMIT: f64 = 0.3;

/// The sampler columns of one chain's kept draws that the checks read (CmdStan's
/// `treedepth__`, `divergent__` and `energy__`); an empty slice skips its check.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChainColumns<'a> {
    /// Tree depth of each transition.
    pub treedepth: &'a [f64],
    /// 1 where the transition diverged.
    pub divergent: &'a [f64],
    /// The Hamiltonian at each draw.
    pub energy: &'a [f64],
}

/// Which check a [`Warning`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Split R̂ above [`RHAT_LIMIT`].
    Rhat,
    /// Bulk ESS below [`ESS_PER_CHAIN`] per chain.
    EssBulk,
    /// Tail ESS below [`ESS_PER_CHAIN`] per chain.
    EssTail,
    /// Divergent transitions among the kept draws.
    Divergences,
    /// Kept transitions that stopped at the tree depth limit.
    TreeDepth,
    /// A chain's E-BFMI below [`EBFMI_LIMIT`].
    Ebfmi,
}

impl Check {
    /// The check's short name, as `attrs["warnings"]` and JSON rows give it.
    pub fn name(self) -> &'static str {
        match self {
            Check::Rhat => "rhat",
            Check::EssBulk => "ess_bulk",
            Check::EssTail => "ess_tail",
            Check::Divergences => "divergences",
            Check::TreeDepth => "treedepth",
            Check::Ebfmi => "ebfmi",
        }
    }
}

/// One failed check, in words a user acts on.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// The check that failed.
    pub check: Check,
    /// What failed and what to try, one line, without a `warning: ` prefix.
    pub message: String,
}

/// Every check the draws fail: `params` the run's summary, `chains` each chain's sampler columns,
/// `max_depth` NUTS's tree depth limit (`None` for a method without trees).
pub fn convergence_warnings(
    params: &[ParameterSummary],
    chains: &[ChainColumns],
    max_depth: Option<u64>,
) -> Vec<Warning> {
    let n_chains = chains.len().max(1);
    let ess_limit = ESS_PER_CHAIN * n_chains as f64;
    let mut out = Vec::new();
    // NaN (a constant parameter, too few draws) fails none of the comparisons: no warning.
    let worst = |value: fn(&ParameterSummary) -> f64, high: bool, limit: f64| {
        let mut bad: Vec<(&str, f64)> = params
            .iter()
            .map(|p| (p.name.as_str(), value(p)))
            .filter(|&(_, v)| if high { v > limit } else { v < limit })
            .collect();
        bad.sort_by(|a, b| {
            if high {
                b.1.total_cmp(&a.1)
            } else {
                a.1.total_cmp(&b.1)
            }
        });
        bad
    };
    let rhat = worst(|p| p.rhat, true, RHAT_LIMIT);
    if !rhat.is_empty() {
        out.push(Warning {
            check: Check::Rhat,
            message: format!(
                "R_hat above {RHAT_LIMIT} for {}: the chains have not mixed; run longer",
                listed(&rhat, 3)
            ),
        });
    }
    for (check, kind, value) in [
        (
            Check::EssBulk,
            "bulk",
            (|p| p.ess_bulk) as fn(&ParameterSummary) -> f64,
        ),
        (Check::EssTail, "tail", |p| p.ess_tail),
    ] {
        let low = worst(value, false, ess_limit);
        if !low.is_empty() {
            out.push(Warning {
                check,
                message: format!(
                    "{kind} ESS below {ess_limit:.0} ({ESS_PER_CHAIN:.0} per chain) for {}: \
                     too few effective draws to trust the estimates; run longer",
                    listed(&low, 3)
                ),
            });
        }
    }
    divergences(&mut out, chains);
    if let Some(depth) = max_depth {
        tree_depth(&mut out, chains, depth);
    }
    let low: Vec<String> = chains
        .iter()
        .enumerate()
        .filter_map(|(c, cols)| {
            let e = e_bfmi(cols.energy);
            (e < EBFMI_LIMIT).then(|| format!("chain {} ({e:.2})", c + 1))
        })
        .collect();
    if !low.is_empty() {
        out.push(Warning {
            check: Check::Ebfmi,
            message: format!(
                "E-BFMI below {EBFMI_LIMIT} in {}: the momentum cannot move the chain across \
                 the posterior's energy levels (heavy tails, a funnel); reparameterize",
                low.join(", ")
            ),
        });
    }
    out
}

/// The first `shown` of `bad` with their values, and how many more.
fn listed(bad: &[(&str, f64)], shown: usize) -> String {
    let mut names: Vec<String> = bad
        .iter()
        .take(shown)
        .map(|(name, v)| format!("{name} ({})", short(*v)))
        .collect();
    if bad.len() > shown {
        names.push(format!("{} more", bad.len() - shown));
    }
    names.join(", ")
}

fn short(v: f64) -> String {
    if v.abs() < 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.0}")
    }
}

fn divergences(out: &mut Vec<Warning>, chains: &[ChainColumns]) {
    let draws: usize = chains.iter().map(|c| c.divergent.len()).sum();
    let divergent: usize = chains
        .iter()
        .map(|c| c.divergent.iter().filter(|&&d| d != 0.0).count())
        .sum();
    if divergent > 0 {
        out.push(Warning {
            check: Check::Divergences,
            message: format!(
                "{divergent} of {draws} kept transitions diverged ({:.1} %): the draws may miss \
                 part of the posterior; a smaller step size (a higher target acceptance) or a \
                 reparameterization may help",
                100.0 * divergent as f64 / draws as f64
            ),
        });
    }
}

fn tree_depth(out: &mut Vec<Warning>, chains: &[ChainColumns], max_depth: u64) {
    let draws: usize = chains.iter().map(|c| c.treedepth.len()).sum();
    let saturated: usize = chains
        .iter()
        .map(|c| {
            c.treedepth
                .iter()
                .filter(|&&t| t >= max_depth as f64)
                .count()
        })
        .sum();
    if saturated > 0 {
        out.push(Warning {
            check: Check::TreeDepth,
            message: format!(
                "{saturated} of {draws} kept transitions stopped at the tree depth limit \
                 {max_depth} ({:.1} %): trajectories were cut short, which costs efficiency; \
                 a dense metric or a larger depth limit may help",
                100.0 * saturated as f64 / draws as f64
            ),
        });
    }
}

/// The energy Bayesian fraction of missing information of one chain's energies:
/// `Σ (Eₙ − Eₙ₋₁)² / Σ (Eₙ − Ē)²`. NaN with fewer than two draws, a non-finite energy, or
/// constant energies.
pub fn e_bfmi(energy: &[f64]) -> f64 {
    let n = energy.len();
    if n < 2 || energy.iter().any(|e| !e.is_finite()) {
        return f64::NAN;
    }
    let mean = energy.iter().sum::<f64>() / n as f64;
    let spread: f64 = energy.iter().map(|e| (e - mean).powi(2)).sum();
    let steps: f64 = energy.windows(2).map(|w| (w[1] - w[0]).powi(2)).sum();
    if spread > 0.0 {
        steps / spread
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, rhat: f64, ess_bulk: f64, ess_tail: f64) -> ParameterSummary {
        ParameterSummary {
            name: name.into(),
            mean: 0.0,
            sd: 1.0,
            mcse_mean: 0.0,
            q5: 0.0,
            q50: 0.0,
            q95: 0.0,
            ess_bulk,
            ess_tail,
            rhat,
        }
    }

    #[test]
    fn a_converged_run_has_no_warning() {
        let energy: Vec<f64> = (0..100).map(|i| ((i * 37) % 11) as f64).collect();
        let zeros = vec![0.0; 100];
        let depth = vec![3.0; 100];
        let cols = ChainColumns {
            treedepth: &depth,
            divergent: &zeros,
            energy: &energy,
        };
        let params = [
            param("a", 1.002, 900.0, 700.0),
            param("b", f64::NAN, f64::NAN, 1e3),
        ];
        assert!(convergence_warnings(&params, &[cols, cols], Some(10)).is_empty());
    }

    #[test]
    fn each_failed_check_names_what_failed() {
        let energy: Vec<f64> = (0..100).map(f64::from).collect(); // a drift: E-BFMI ≈ 1e-4
        let mut divergent = vec![0.0; 100];
        divergent[7] = 1.0;
        let depth = vec![10.0; 100];
        let cols = ChainColumns {
            treedepth: &depth,
            divergent: &divergent,
            energy: &energy,
        };
        let params = [
            param("a", 1.2, 150.0, 300.0),
            param("b", 3.4, 900.0, 50.0),
            param("c", 1.02, 900.0, 900.0),
            param("d", 1.5, 900.0, 900.0),
            param("e", 1.1, 900.0, 900.0),
        ];
        let w = convergence_warnings(&params, &[cols, cols], Some(10));
        let checks: Vec<Check> = w.iter().map(|w| w.check).collect();
        use Check::*;
        assert_eq!(
            checks,
            [Rhat, EssBulk, EssTail, Divergences, TreeDepth, Ebfmi]
        );
        assert!(
            w[0].message
                .contains("b (3.400), d (1.500), a (1.200), 2 more"),
            "{}",
            w[0].message
        );
        assert!(
            w[1].message
                .contains("below 200 (100 per chain) for a (150)"),
            "{}",
            w[1].message
        );
        assert!(w[2].message.contains("for b (50)"), "{}", w[2].message);
        assert!(
            w[3].message
                .starts_with("2 of 200 kept transitions diverged (1.0 %)")
        );
        assert!(
            w[4].message
                .starts_with("200 of 200 kept transitions stopped at the tree depth limit 10")
        );
        assert!(
            w[5].message.contains("chain 1 (0.00), chain 2 (0.00)"),
            "{}",
            w[5].message
        );
        // Without trees there is no depth to saturate.
        assert!(
            convergence_warnings(&params, &[cols], None)
                .iter()
                .all(|w| w.check != TreeDepth)
        );
    }

    #[test]
    fn e_bfmi_of_independent_energies_is_near_two_and_of_a_random_walk_near_zero() {
        // Independent draws: E[(Eₙ − Eₙ₋₁)²] = 2 Var E.
        let mut state = 12345u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let iid: Vec<f64> = (0..20_000).map(|_| uniform()).collect();
        assert!((e_bfmi(&iid) - 2.0).abs() < 0.05, "{}", e_bfmi(&iid));
        let mut walk = vec![0.0];
        for _ in 0..20_000 {
            let last = *walk.last().unwrap();
            walk.push(last + uniform() - 0.5);
        }
        assert!(e_bfmi(&walk) < 0.01, "{}", e_bfmi(&walk));
        assert!(e_bfmi(&[1.0]).is_nan() && e_bfmi(&[2.0, 2.0]).is_nan());
    }
}
