//! `shmc bench umbridge`: what serving a model over UM-Bridge costs, and where it pays.
//!
//! 1. The protocol's overhead per evaluation on loopback: the banana (whose own `U` costs
//!    nanoseconds) evaluated in process and through an in-process `shmc serve`, one call
//!    after another, so the difference is HTTP, JSON and the worker hand-off.
//! 2. A run of 4 chains of HMC against the elliptic PDE model served by a separate
//!    `shmc serve` process with 1 and then 2 workers, and then by 2 processes of 1 worker
//!    each (`--url A,B`, the client spreading the calls): the sampler keeps one call per chain
//!    in flight, so the server's workers set the pace (on a machine with cores to spare).
//! 3. RNS-HMC against the 2-worker server: served calls per effective sample, beside
//!    HMC's, which is where a surrogate pays most when every exact call crosses the network.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use shmc::core::{Potential, Steps};

use shmc::Model;
use shmc::models::banana::Banana;
use shmc::models::elliptic_pde::{EllipticPde, PdeSettings};
use shmc::models::umbridge::{Likelihood, ServedPosterior, ServedSettings};
use shmc::sampler::{
    DrawSink, Method, NullSink, Run, SampleConfig, SurrogateSettings, SurrogateSteps, sample,
};
use shmc::serve::served::served_maps;
use shmc::serve::server::{Server, ServerSettings};
use shmc::surrogates::kinds::SurrogateKind;
use shmc::surrogates::network::{NetworkFitter, TrainOptions};
use shmc::umbridge::client::Patience;
use shmc::{Error, Result};

/// Chains of the served runs.
const CHAINS: usize = 4;

/// Starts a server of the elliptic PDE model with these settings and this many workers in a
/// process of its own, and returns its URL and what keeps it running (dropped: stopped). The
/// CLI knows how (`shmc serve`); the bench only measures.
pub type StartServer<'a> =
    &'a dyn Fn(&PdeSettings, usize) -> Result<(String, Box<dyn std::any::Any>)>;

/// Mean seconds per call of `f` over `n` calls.
fn seconds_per_call(n: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() / n as f64
}

/// The log-density `name` served at `url` (a comma-separated list for several instances).
fn connect(url: &str, name: &str) -> Result<ServedPosterior> {
    ServedPosterior::connect(ServedSettings {
        url: url.to_string(),
        model: Some(name.to_string()),
        likelihood: Likelihood::LogDensity,
        patience: Patience::default(),
        config: serde_json::json!({}),
        memory_limit: shmc::memory::machine_default_limit(),
    })
}

/// Part 1: microseconds per value and per value-and-gradient, in process and served.
fn overhead(quick: bool, out: &mut String) -> Result<()> {
    let n = if quick { 500 } else { 5000 };
    let banana = Arc::new(Banana::simulate(Banana::PAPER_N, 1)?);
    let server = Server::start(
        served_maps("banana", banana.clone(), None),
        &ServerSettings {
            port: 0,
            workers: 1,
            ..ServerSettings::default()
        },
    )?;
    let served = connect(&format!("http://{}", server.addr()), "banana")?;
    let q = [0.3, -0.7];
    let mut g = [0.0; 2];
    // Warm the connection and the caches.
    served.value_and_gradient(&q, &mut g);
    let local_value = seconds_per_call(n, || {
        std::hint::black_box(banana.value(std::hint::black_box(&q)));
    });
    let served_value = seconds_per_call(n, || {
        std::hint::black_box(served.value(&q));
    });
    let local_both = seconds_per_call(n, || {
        std::hint::black_box(banana.value_and_gradient(&q, &mut g));
    });
    let served_both = seconds_per_call(n, || {
        std::hint::black_box(served.value_and_gradient(&q, &mut g));
    });
    let us = |s: f64| s * 1e6;
    let _ = writeln!(
        out,
        "protocol overhead on loopback (banana, {n} sequential calls; U itself {:.3} us):\n  \
         U:        {:8.1} us served, {:.3} us in process: {:.1} us per Evaluate call\n  \
         U and dU: {:8.1} us served (Evaluate + Gradient), {:.3} us in process",
        us(local_value),
        us(served_value),
        us(local_value),
        us(served_value - local_value),
        us(served_both),
        us(local_both),
    );
    if let Some(f) = served.failure() {
        return Err(Error::ModelFailed(f));
    }
    Ok(())
}

/// One served or in-process run and what it cost.
struct Measured {
    label: String,
    seconds: f64,
    calls: u64,
    /// Exact evaluations (a value, or a value and gradient) while making kept draws.
    sampling_evaluations: u64,
    min_ess: f64,
}

/// The exact calls (or solves) a model has made: its work counters but the rejections.
fn exact_calls(model: &dyn Model) -> u64 {
    model
        .work()
        .iter()
        .filter(|(name, _)| !name.contains("rejected"))
        .map(|(_, n)| n)
        .sum()
}

fn measure(label: &str, model: &dyn Model, config: &SampleConfig) -> Result<Measured> {
    let before = exact_calls(model);
    let start = Instant::now();
    let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains)
        .map(|_| Box::new(NullSink) as _)
        .collect();
    let run: Run = sample(model, config, sinks, &|_, _| {}, None)?;
    let seconds = start.elapsed().as_secs_f64();
    let after = exact_calls(model);
    let min_ess = run
        .summary()
        .iter()
        .map(|p| p.ess_bulk)
        .fold(f64::INFINITY, f64::min);
    let sampling_evaluations = run
        .chains
        .iter()
        .map(|c| c.sampling_evaluations.exact_gradients + c.sampling_evaluations.exact_values)
        .sum();
    Ok(Measured {
        label: label.to_string(),
        seconds,
        calls: after - before,
        sampling_evaluations,
        min_ess,
    })
}

/// Runs `shmc bench umbridge`; `start_server` starts the server processes, `log`
/// tells progress. Returns the report.
pub fn run_umbridge(
    start_server: StartServer<'_>,
    quick: bool,
    seed: u64,
    log: &dyn Fn(&str),
) -> Result<String> {
    let mut out = String::new();
    log("protocol overhead on loopback ...");
    overhead(quick, &mut out)?;
    let plan = PdePlan::new(quick, seed);
    let served = plan.measure(start_server, log)?;
    plan.write_table(&served, &mut out);
    served.write_ratios(&mut out);
    Ok(out)
}

/// The PDE runs of part 2 and 3: the model's size, the iterations, and the HMC and RNS-HMC
/// samplers every served run shares, so that the rows differ in the serving alone.
struct PdePlan {
    pde: PdeSettings,
    warmup: usize,
    draws: usize,
    hmc: SampleConfig,
    rns: SampleConfig,
}

/// The rows of the PDE runs, in the order they are measured, and how the two processes of one
/// worker split the calls.
struct Served {
    in_process: Measured,
    one_worker: Measured,
    two_workers: Measured,
    rns_two_workers: Measured,
    two_processes: Measured,
    /// Each process's Evaluate calls, joined by " + ".
    split: String,
}

impl PdePlan {
    /// The quick run's smaller mesh, fewer modes, shorter chains and smaller network, or the
    /// full run's.
    fn new(quick: bool, seed: u64) -> Self {
        let pde = if quick {
            PdeSettings {
                mesh: 15,
                modes: 5,
                ..PdeSettings::default()
            }
        } else {
            PdeSettings::default()
        };
        let (warmup, draws) = if quick { (150, 150) } else { (300, 500) };
        let hmc = SampleConfig {
            chains: CHAINS,
            warmup,
            draws,
            seed,
            steps: Steps::Jittered(10),
            ..SampleConfig::default()
        };
        let rns = SampleConfig {
            method: Method::RnsHmc(SurrogateSettings {
                kind: SurrogateKind::Network(NetworkFitter::score(TrainOptions {
                    hidden: if quick { 200 } else { 1000 },
                    seed,
                    ..TrainOptions::default()
                })),
                train_after: Some(warmup / 5),
                trajectory: SurrogateSteps::Auto,
                ..SurrogateSettings::default()
            }),
            ..hmc.clone()
        };
        Self {
            pde,
            warmup,
            draws,
            hmc,
            rns,
        }
    }

    /// Measures the runs one after another: in process, then served by 1 worker, by 2 workers
    /// (HMC and RNS-HMC), and by 2 processes of 1 worker. Each server stops when its block
    /// ends, so no server competes for the cores with the next run's.
    fn measure(&self, start_server: StartServer<'_>, log: &dyn Fn(&str)) -> Result<Served> {
        let (pde, hmc, rns) = (&self.pde, &self.hmc, &self.rns);
        log("HMC on the PDE model in process ...");
        let local = EllipticPde::simulate(*pde)?;
        let in_process = measure("HMC, in process", &local, hmc)?;
        let one_worker = {
            log("HMC on the PDE model served with 1 worker ...");
            let (url, _server) = start_server(pde, 1)?;
            measure(
                "HMC, served by 1 worker",
                &connect(&url, "elliptic-pde")?,
                hmc,
            )?
        };
        let (two_workers, rns_two_workers) = {
            log("HMC on the PDE model served with 2 workers ...");
            let (url, _server) = start_server(pde, 2)?;
            let hmc_row = measure(
                "HMC, served by 2 workers",
                &connect(&url, "elliptic-pde")?,
                hmc,
            )?;
            log("RNS-HMC on the PDE model served with 2 workers ...");
            let rns_row = measure(
                "RNS-HMC, served by 2 workers",
                &connect(&url, "elliptic-pde")?,
                rns,
            )?;
            (hmc_row, rns_row)
        };
        let (two_processes, split) = {
            log("HMC on the PDE model served by 2 processes of 1 worker ...");
            let (a, _a) = start_server(pde, 1)?;
            let (b, _b) = start_server(pde, 1)?;
            let served = connect(&format!("{a},{b}"), "elliptic-pde")?;
            let row = measure("HMC, served by 2 processes", &served, hmc)?;
            let split: Vec<String> = served
                .evaluations_per_instance()
                .iter()
                .map(|(_, n)| n.to_string())
                .collect();
            (row, split.join(" + "))
        };
        Ok(Served {
            in_process,
            one_worker,
            two_workers,
            rns_two_workers,
            two_processes,
            split,
        })
    }

    /// Writes the runs' table: one line per run, HMC's first and RNS-HMC's last.
    fn write_table(&self, served: &Served, out: &mut String) {
        let (pde, warmup, draws) = (&self.pde, self.warmup, self.draws);
        let _ = writeln!(
            out,
            "\nelliptic PDE ({}x{} mesh, {} modes), {CHAINS} chains x ({warmup} warmup + {draws} \
             draws), steps 1..=10, {} cores here:",
            pde.mesh,
            pde.mesh,
            pde.modes,
            std::thread::available_parallelism().map_or(1, usize::from)
        );
        let _ = writeln!(
            out,
            "  {:<30} {:>7} {:>12} {:>12} {:>8} {:>14} {:>22}",
            "run",
            "wall s",
            "exact calls",
            "calls per s",
            "min ESS",
            "calls per ESS",
            "sampling evals per ESS"
        );
        let rows = [
            &served.in_process,
            &served.one_worker,
            &served.two_workers,
            &served.two_processes,
            &served.rns_two_workers,
        ];
        for r in rows {
            let _ = writeln!(
                out,
                "  {:<30} {:>7.1} {:>12} {:>12.0} {:>8.0} {:>14.1} {:>22.2}",
                r.label,
                r.seconds,
                r.calls,
                r.calls as f64 / r.seconds,
                r.min_ess,
                r.calls as f64 / r.min_ess,
                r.sampling_evaluations as f64 / r.min_ess
            );
        }
        let _ = writeln!(
            out,
            "  (exact calls, warmup included: served Evaluate + Gradient calls, in process forward \
             + adjoint solves; sampling evals: exact values and gradients while making kept draws)"
        );
    }
}

impl Served {
    /// Writes the line the table is for: what a second worker, a second process and the
    /// surrogate each buy.
    fn write_ratios(&self, out: &mut String) {
        let per_second = |r: &Measured| r.calls as f64 / r.seconds;
        let (one, two, procs, rns) = (
            &self.one_worker,
            &self.two_workers,
            &self.two_processes,
            &self.rns_two_workers,
        );
        let _ = writeln!(
            out,
            "2 workers vs 1: {:.2}x the served calls per second; 2 processes of 1 worker vs 1: \
             {:.2}x (their Evaluate calls {}); RNS-HMC vs HMC: {:.1}x fewer served calls per \
             effective sample, warmup included, {:.1}x fewer exact evaluations per effective \
             sample while sampling",
            per_second(two) / per_second(one),
            per_second(procs) / per_second(one),
            self.split,
            (two.calls as f64 / two.min_ess) / (rns.calls as f64 / rns.min_ess),
            (two.sampling_evaluations as f64 / two.min_ess)
                / (rns.sampling_evaluations as f64 / rns.min_ess)
        );
    }
}
