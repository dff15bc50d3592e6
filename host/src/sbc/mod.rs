//! Simulation-based calibration (Talts, Betancourt, Simpson, Vehtari and Gelman 2018): the test
//! that a sampler draws from the posterior it claims to.
//!
//! Each replication draws parameters `θ̃` from the model's prior and data from `θ̃` (the model's
//! [`Generative`] form), samples the posterior of those data, and records the rank of `θ̃` among
//! the (thinned) posterior draws. Averaged over the prior, the posterior of simulated data is
//! the prior again, so for a correct sampler and independent draws each parameter's rank is
//! uniform; a sampler that is too narrow piles ranks at the ends (∪), too wide in the middle
//! (∩), biased on one side. [`uniformity`] tests that with χ², [`plot`] draws it.
//!
//! The sampler is anything that implements [`PosteriorSampler`]: a [`SampleConfig`] samples
//! with its [`crate::sampler::Method`], whatever the method, the surrogate ones training their
//! surrogate from each replication's own warmup as a user's run would. Replications run in
//! parallel (rayon), each with seeds derived from the master seed and its number, so a run is
//! reproducible whatever the number of threads.

mod folder;
mod part;
mod plot;
mod ranks;
mod report;
mod uniformity;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use rand::Rng;
use rayon::prelude::*;

pub use folder::{SbcFolder, calibration_files};
pub use part::{PART_FILE, Part, PartRecord, TABLE_PART_FILE, check_cover, merge};
pub use plot::rank_histogram;
pub use ranks::{ChainDraws, kept_per_chain, min_ess, ranks, thin_for};
pub use report::{format_report, write_files};
pub use uniformity::{ALPHA, Bins, MAX_BINS, MIN_EXPECTED, Uniformity, Verdict, chi_squared_test};

use crate::random::chain_rng;
use crate::sampler::{DrawSink, NullSink, SampleConfig, sample};
use crate::{Error, Generative, Model, Result};

/// Without a given thinning, the share of replications whose kept draws should each be worth
/// at least one independent draw: the thinning follows this quantile of the replications' ESS
/// per draw. Not the least of them: a replication stuck in one mode (an ESS near 1, a failure
/// the ranks should show) would otherwise thin every other one down to a handful of draws.
pub const THINNED_ENOUGH: f64 = 0.9;

/// Without a given thinning, the fewest draws a replication keeps: when more than a tenth of
/// the replications barely move (an ESS of a few draws), the ESS would thin every replication
/// down to two or three draws and a test with no power; then the thinning stops here and the
/// summary counts the replications whose kept draws stay correlated.
pub const MIN_KEPT: usize = 20;

/// Replication `r`'s data seed is the first number of this stream plus `r` (far from the
/// chains' own small stream numbers).
const DATA_STREAM: usize = 1 << 40;
/// Replication `r`'s sampler seed is the first number of this stream plus `r`.
const SAMPLER_STREAM: usize = 2 << 40;

/// One replication's posterior draws and what the sampler reports about them.
#[derive(Clone, Debug, Default)]
pub struct PosteriorDraws {
    /// Each chain's kept draws of each reported parameter: `chains[chain][parameter][i]`.
    pub chains: Vec<Vec<Vec<f64>>>,
    /// Divergent transitions among the kept draws.
    pub divergences: usize,
}

/// How a replication's posterior is sampled.
pub trait PosteriorSampler: Sync {
    /// Samples `posterior` from the seed `seed`.
    fn sample(&self, posterior: &dyn Model, seed: u64) -> Result<PosteriorDraws>;
}

/// The driver's chains with this configuration's method, its seed replaced by the
/// replication's.
impl PosteriorSampler for SampleConfig {
    fn sample(&self, posterior: &dyn Model, seed: u64) -> Result<PosteriorDraws> {
        let config = SampleConfig {
            seed,
            ..self.clone()
        };
        let sinks = (0..config.chains)
            .map(|_| Box::new(NullSink) as Box<dyn DrawSink>)
            .collect();
        let run = sample(posterior, &config, sinks, &|_, _| {}, None)?;
        let parameters = run.names.len();
        Ok(PosteriorDraws {
            chains: run
                .chains
                .iter()
                .map(|c| (0..parameters).map(|p| c.parameter(p).to_vec()).collect())
                .collect(),
            divergences: run.divergences(),
        })
    }
}

/// What a calibration run does besides sampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SbcSettings {
    /// Replications (prior draw, data, posterior sample).
    pub replications: usize,
    /// The master seed of every replication's data and sampler seeds.
    pub seed: u64,
    /// Keep every `thin`-th draw of each chain; `None` chooses it from the replications'
    /// effective sample sizes (see [`THINNED_ENOUGH`]).
    pub thin: Option<usize>,
    /// Replications run at once; 0 uses every core.
    pub jobs: usize,
    /// Run only these of the replications, each with its seeds of the whole run (see
    /// [`part`]); `None` runs them all.
    pub part: Option<Part>,
    /// Bytes a part without a given thinning may take for its replications' ranks at every
    /// thinning the whole run could choose (see [`Replication::ranks_by_thin`]).
    pub memory_limit: u64,
}

impl SbcSettings {
    /// The indices (from 0) of the replications to run: all, or the part's, which must lie
    /// within the replications.
    fn indices(&self) -> Result<std::ops::Range<usize>> {
        let Some(part) = self.part else {
            return Ok(0..self.replications);
        };
        part.within(self.replications)
    }
}

/// Where the thinning came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Thinning {
    /// Given by the user.
    Given,
    /// From the effective sample size per draw (the smallest over the parameters, bulk or
    /// tail), at its [`THINNED_ENOUGH`] lower quantile over the replications, so that in all
    /// but a tenth of them a kept draw is worth at least one independent draw.
    FromEss {
        /// That quantile of the smallest ESS per draw.
        ess_per_draw: f64,
        /// The thinning that ESS asked for, when it would have kept fewer than [`MIN_KEPT`]
        /// draws and was lowered.
        lowered_from: Option<usize>,
    },
}

/// One replication's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Replication {
    /// Its number in the run, from 1 (its seeds follow from it).
    pub number: usize,
    /// The seed of its data (the generative form's stream).
    pub data_seed: u64,
    /// The seed of its sampler.
    pub sampler_seed: u64,
    /// The rank of each parameter's true value among the kept draws.
    pub ranks: Vec<usize>,
    /// The smallest bulk or tail ESS over the parameters, of all its draws before thinning.
    pub min_ess: f64,
    /// Divergent transitions among its kept draws.
    pub divergences: usize,
    /// Seconds it took (simulation and sampling).
    pub seconds: f64,
    /// In a part without a given thinning: its ranks at every thinning the whole run could
    /// choose (`ranks_by_thin[t - 1]` at `t`), since that choice depends on the ESS of
    /// replications the part does not run; [`merge`] picks the one row. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks_by_thin: Vec<Vec<usize>>,
}

/// A finished calibration run.
#[derive(Clone, Debug)]
pub struct SbcRun {
    /// The parameter names.
    pub names: Vec<String>,
    /// Every replication, in order.
    pub replications: Vec<Replication>,
    /// The thinning applied to every chain.
    pub thin: usize,
    /// Where it came from.
    pub thinning: Thinning,
    /// `L`: the kept draws per replication, so ranks lie in `0..=L`.
    pub max_rank: usize,
    /// The bins of the tests and histograms.
    pub bins: Bins,
    /// Per parameter, the χ² test of its ranks.
    pub tests: Vec<Uniformity>,
    /// The verdict over all parameters.
    pub verdict: Verdict,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// In a part without a given thinning: the kept draws per replication at every thinning
    /// the whole run could choose (`kept_by_thin[t - 1]` at `t`); empty otherwise.
    pub kept_by_thin: Vec<usize>,
}

impl SbcRun {
    /// Replications whose draws held fewer effective draws than the `L` kept: their kept draws
    /// are still correlated, which by itself bends the ranks towards the ends.
    pub fn underthinned(&self) -> usize {
        self.replications
            .iter()
            .filter(|r| r.min_ess < self.max_rank as f64)
            .count()
    }
}

/// A replication's draws before ranking.
struct Sampled {
    number: usize,
    data_seed: u64,
    sampler_seed: u64,
    truth: Vec<f64>,
    draws: PosteriorDraws,
    min_ess: f64,
    seconds: f64,
}

impl Sampled {
    fn ranked(self, thin: usize) -> Replication {
        Replication {
            number: self.number,
            data_seed: self.data_seed,
            sampler_seed: self.sampler_seed,
            ranks: ranks(&self.draws.chains, &self.truth, thin),
            min_ess: self.min_ess,
            divergences: self.draws.divergences,
            seconds: self.seconds,
            ranks_by_thin: Vec::new(),
        }
    }

    /// Its ranks at thinnings `1..=most`.
    fn ranks_by_thin(&self, most: usize) -> Vec<Vec<usize>> {
        (1..=most)
            .map(|t| ranks(&self.draws.chains, &self.truth, t))
            .collect()
    }

    /// The kept draws per replication at thinning `thin`.
    fn kept(&self, thin: usize) -> usize {
        self.draws
            .chains
            .iter()
            .map(|c| c.first().map_or(0, |p| kept_per_chain(p.len(), thin)))
            .sum()
    }

    /// All draws over all chains.
    fn draws(&self) -> usize {
        self.kept(1)
    }

    /// The largest thinning a run may choose: the one that still keeps [`MIN_KEPT`] draws.
    fn most_thin(&self) -> usize {
        let chains = self.draws.chains.len().max(1);
        let per_chain = self.draws() / chains;
        (per_chain / MIN_KEPT.div_ceil(chains)).max(1)
    }
}

/// Replication `r` of `settings`: its seeds, the simulation, the posterior draws.
fn replicate(
    generative: &dyn Generative,
    sampler: &dyn PosteriorSampler,
    settings: &SbcSettings,
    r: usize,
) -> Result<Sampled> {
    let start = Instant::now();
    let data_seed = chain_rng(settings.seed, DATA_STREAM + r).next_u64();
    let sampler_seed = chain_rng(settings.seed, SAMPLER_STREAM + r).next_u64();
    let fail = |e: Error| {
        Error::invalid(format!(
            "replication {} (data seed {data_seed}, sampler seed {sampler_seed}): {e}",
            r + 1
        ))
    };
    let simulated = generative.simulate(data_seed).map_err(fail)?;
    let draws = sampler
        .sample(simulated.posterior.as_ref(), sampler_seed)
        .map_err(fail)?;
    // The draws are reported values; so is the truth, for ranks on the same scale.
    let mut truth = Vec::with_capacity(simulated.truth.len());
    simulated
        .posterior
        .write_parameters(&simulated.truth, &mut truth);
    Ok(Sampled {
        number: r + 1,
        data_seed,
        sampler_seed,
        truth,
        min_ess: min_ess(&draws.chains),
        draws,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Checks that `settings` can calibrate `model` — before any work, and before a caller claims
/// a folder for a run that would be refused.
pub fn check(model: &dyn Model, settings: &SbcSettings) -> Result<()> {
    model
        .generative()
        .ok_or_else(|| Error::invalid("the model has no generative form to calibrate against"))?;
    if settings.thin == Some(0) {
        return Err(Error::setting("thin", "must be at least 1"));
    }
    settings.indices()?;
    // A part's bins are the whole run's; their count follows once `L` is known.
    Bins::new(settings.replications, 1)?;
    Ok(())
}

/// Runs the calibration of `sampler` on `model`'s generative form.
///
/// Every replication's draws are kept until all have run (the thinning may depend on them
/// all): `replications × chains × draws × parameters` numbers. `progress(done)` is called after
/// each replication; setting `interrupt` stops the run (an error) before the next replication
/// starts.
pub fn run(
    model: &dyn Model,
    sampler: &dyn PosteriorSampler,
    settings: &SbcSettings,
    progress: &(dyn Fn(usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<SbcRun> {
    check(model, settings)?;
    let generative = model.generative().expect("checked");
    let indices = settings.indices()?;
    let start = Instant::now();
    let sampled = sample_all(generative, sampler, settings, indices, progress, interrupt)?;
    let most = sampled.first().map_or(1, Sampled::most_thin);
    let (thin, thinning) = match settings.thin {
        Some(thin) => (thin, Thinning::Given),
        None => {
            let per_draw = sampled.iter().map(|s| s.min_ess / s.draws() as f64);
            choose_thin(per_draw.collect(), most)?
        }
    };
    // Every replication keeps as many draws (the sampler's draws are fixed in number).
    let max_rank = sampled.first().map_or(0, |s| s.kept(thin));
    if let Some(other) = sampled.iter().find(|s| s.kept(thin) != max_rank) {
        return Err(Error::invalid(format!(
            "replications kept {max_rank} and {} draws: ranks need the same number in each",
            other.kept(thin)
        )));
    }
    // A part whose thinning the merge chooses keeps its ranks at every thinning it may choose.
    let deferred = settings.part.is_some() && settings.thin.is_none();
    let kept_by_thin = match (deferred, sampled.first()) {
        (true, Some(first)) => {
            check_ranks_memory(sampled.len(), most, first.truth.len(), settings)?;
            (1..=most).map(|t| first.kept(t)).collect()
        }
        _ => Vec::new(),
    };
    let replications: Vec<Replication> = sampled
        .into_iter()
        .map(|s| {
            let by_thin = if deferred {
                s.ranks_by_thin(most)
            } else {
                Vec::new()
            };
            Replication {
                ranks_by_thin: by_thin,
                ..s.ranked(thin)
            }
        })
        .collect();
    let seconds = start.elapsed().as_secs_f64();
    let names = model.parameter_names();
    let ranked = ((thin, thinning), max_rank, settings.replications);
    let mut run = calibrated(names, replications, ranked, seconds)?;
    run.kept_by_thin = kept_by_thin;
    Ok(run)
}

/// Samples replications `indices` of `settings` on a pool of `settings.jobs` threads.
fn sample_all(
    generative: &dyn Generative,
    sampler: &dyn PosteriorSampler,
    settings: &SbcSettings,
    indices: std::ops::Range<usize>,
    progress: &(dyn Fn(usize) + Sync),
    interrupt: Option<&AtomicBool>,
) -> Result<Vec<Sampled>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.jobs)
        .build()
        .map_err(|e| Error::invalid(format!("cannot start the replications' threads: {e}")))?;
    let done = AtomicUsize::new(0);
    pool.install(|| {
        indices
            .clone()
            .into_par_iter()
            .map(|r| {
                if interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
                    return Err(Error::invalid(format!(
                        "interrupted after {} of {} replications",
                        done.load(Ordering::Relaxed),
                        indices.len()
                    )));
                }
                let sampled = replicate(generative, sampler, settings, r)?;
                progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                Ok(sampled)
            })
            .collect::<Result<Vec<_>>>()
    })
}

/// The ranks at every thinning up to `most` of `replications` replications of `parameters`
/// parameters, sized against the memory limit before they are computed.
fn check_ranks_memory(
    replications: usize,
    most: usize,
    parameters: usize,
    settings: &SbcSettings,
) -> Result<()> {
    let bytes = (replications as u128)
        .checked_mul(most as u128)
        .and_then(|n| n.checked_mul(parameters as u128))
        .and_then(|n| n.checked_mul(std::mem::size_of::<usize>() as u128));
    crate::memory::check(
        "the part's ranks at every thinning",
        "replications",
        bytes,
        settings.memory_limit,
    )
}

/// The thinning chosen from every replication's smallest ESS per draw (`per_draw`), at most
/// `most`: the thinning at the [`THINNED_ENOUGH`] quantile, lowered to keep [`MIN_KEPT`] draws.
/// A run and the merge of its parts choose it here alike.
fn choose_thin(mut per_draw: Vec<f64>, most: usize) -> Result<(usize, Thinning)> {
    per_draw.sort_by(f64::total_cmp);
    let at = ((1.0 - THINNED_ENOUGH) * per_draw.len() as f64) as usize;
    let ess_per_draw = per_draw.get(at).copied().unwrap_or(0.0);
    let wanted = thin_for(ess_per_draw).ok_or_else(|| {
        Error::setting(
            "thin",
            "cannot be chosen from the effective sample size, which the replications' draws do \
             not have (chains that never moved): give it",
        )
    })?;
    let thin = wanted.min(most);
    let lowered_from = (thin < wanted).then_some(wanted);
    Ok((
        thin,
        Thinning::FromEss {
            ess_per_draw,
            lowered_from,
        },
    ))
}

/// The run of the ranked `replications` of parameters `names`, thinned by `thin` to `max_rank`
/// kept draws each, with its tests of uniformity and their verdict. The bins are those of the
/// whole run's `whole` replications: a part's (fewer than twenty, maybe) are its test's too.
fn calibrated(
    names: Vec<String>,
    replications: Vec<Replication>,
    ((thin, thinning), max_rank, whole): ((usize, Thinning), usize, usize),
    wall_seconds: f64,
) -> Result<SbcRun> {
    let bins = Bins::new(whole, max_rank)?;
    let tests: Vec<Uniformity> = (0..names.len())
        .map(|p| {
            let ranks: Vec<usize> = replications.iter().map(|r| r.ranks[p]).collect();
            chi_squared_test(&ranks, bins)
        })
        .collect();
    Ok(SbcRun {
        names,
        replications,
        thin,
        thinning,
        max_rank,
        bins,
        verdict: Verdict::new(&tests),
        tests,
        wall_seconds,
        kept_by_thin: Vec::new(),
    })
}
