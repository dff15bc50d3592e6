//! A user's model that misbehaves, through the library's `sampler::sample`, under HMC and under
//! NUTS (nuts-rs, which calls the model inside its own code): a NaN potential is a counted
//! divergence and the run goes on; a gradient with entries left unwritten, a panic on an index,
//! reported values of the wrong count are one error naming the chain and the point, the other
//! chains stop instead of running on, and every sink hears how its chain ended.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use shmc::core::Potential;
use shmc::sampler::{
    ChainResult, DrawSink, Init, InverseMetric, Method, NullSink, NutsSettings, SampleConfig,
    StepSize, sample,
};
use shmc::{Error, Model, Result};

/// How the fault shows.
#[derive(Clone, Copy)]
enum Fault {
    /// `U` is NaN where `q₁ > 1`.
    NanBeyondOne,
    /// The gradient's last entry is never written.
    ShortGradient,
    /// The gradient is written one entry past its end (a model that believes `d + 1`).
    IndexPastTheEnd,
    /// One value fewer is reported than there are parameter names.
    ShortReport,
    /// The `n`-th gradient evaluation (counting every chain's) panics, once.
    PanicOnce(usize),
}

/// A standard normal in `d` dimensions with `fault`.
struct Faulty {
    d: usize,
    fault: Fault,
    evaluations: AtomicUsize,
}

impl Faulty {
    fn new(d: usize, fault: Fault) -> Self {
        Self {
            d,
            fault,
            evaluations: AtomicUsize::new(0),
        }
    }
}

impl Potential for Faulty {
    fn dim(&self) -> usize {
        self.d
    }
    fn value(&self, q: &[f64]) -> f64 {
        match self.fault {
            Fault::NanBeyondOne if q[0] > 1.0 => f64::NAN,
            _ => 0.5 * q.iter().map(|x| x * x).sum::<f64>(),
        }
    }
    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        let written = match self.fault {
            Fault::ShortGradient => self.d - 1,
            Fault::IndexPastTheEnd => self.d + 1,
            _ => self.d,
        };
        for i in 0..written {
            grad[i] = q.get(i).copied().unwrap_or(0.0);
        }
        if let Fault::PanicOnce(n) = self.fault
            && self.evaluations.fetch_add(1, Ordering::Relaxed) == n
        {
            panic!("evaluation {n} failed");
        }
        self.value(q)
    }
}

impl Model for Faulty {
    fn parameter_names(&self) -> Vec<String> {
        shmc::model::indexed_names("q", self.d)
    }
    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        match self.fault {
            Fault::ShortReport => out.extend_from_slice(&q[1..]),
            _ => out.extend_from_slice(q),
        }
    }
}

/// The samplers every fault is tried under.
fn methods() -> [Method; 2] {
    [Method::Hmc, Method::Nuts(NutsSettings::default())]
}

fn config(method: Method, chains: usize, draws: usize) -> SampleConfig {
    SampleConfig {
        chains,
        warmup: 200,
        draws,
        seed: 3,
        method,
        ..SampleConfig::default()
    }
}

fn run(model: &Faulty, config: &SampleConfig) -> Result<shmc::sampler::Run> {
    let sinks: Vec<Box<dyn DrawSink>> = (0..config.chains)
        .map(|_| Box::new(NullSink) as _)
        .collect();
    sample(model, config, sinks, &|_, _| {}, None)
}

#[test]
fn a_nan_potential_is_a_counted_divergence_and_never_a_draw() {
    let model = Faulty::new(1, Fault::NanBeyondOne);
    for method in methods() {
        let name = method.name();
        let mut config = config(method, 2, 1000);
        if name == "hmc" {
            // A fixed step size long enough to cross q = 1 often (NUTS's trees cross it anyway).
            config.step_size = StepSize::Fixed(0.5);
        }
        let run = run(&model, &config).expect("a NaN potential is not an error");
        assert!(
            run.divergences() > 10,
            "{name}: {} divergences",
            run.divergences()
        );
        for chain in &run.chains {
            assert_eq!(chain.kept(), 1000);
            assert!(chain.parameter(0).iter().all(|&q| q <= 1.0), "{name}");
        }
    }
}

/// Asserts that `model` fails `sample` with one line that holds every one of `needles`.
fn assert_fails_naming(model: &Faulty, needles: &[&str]) {
    for method in methods() {
        let name = method.name();
        let err = run(model, &config(method, 2, 100)).expect_err("the fault is an error");
        let text = err.to_string();
        assert!(matches!(err, Error::Invalid(_)), "{name}: {err:?}");
        assert_eq!(text.lines().count(), 1, "{name}: {text}");
        for needle in needles {
            assert!(text.contains(needle), "{name}: {text} lacks {needle:?}");
        }
    }
}

#[test]
fn a_gradient_with_an_entry_left_unwritten_names_the_chain_entry_and_point() {
    assert_fails_naming(
        &Faulty::new(3, Fault::ShortGradient),
        &[
            "the model panicked: the gradient left entry 3 of 3 unwritten (at q = [",
            "chain ",
        ],
    );
}

#[test]
fn a_gradient_written_past_its_end_names_the_chain_and_point() {
    assert_fails_naming(
        &Faulty::new(2, Fault::IndexPastTheEnd),
        &["chain ", "index out of bounds", "(at q = ["],
    );
}

#[test]
fn reported_values_of_the_wrong_count_never_reach_a_row() {
    assert_fails_naming(
        &Faulty::new(2, Fault::ShortReport),
        &[
            "chain ",
            "the model reported 1 values for its 2 parameter names",
        ],
    );
}

/// How a chain ended, as its sink heard it.
#[derive(Clone, Debug, Default)]
struct Ending {
    /// Rows written.
    rows: usize,
    /// `Some(interrupted)` once the chain finished.
    finished: Option<bool>,
    /// The error, if the chain failed.
    failure: Option<String>,
}

/// A sink that tells the test how its chain ended.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Ending>>);

impl DrawSink for Heard {
    fn adaptation(&mut self, _: f64, _: &InverseMetric) -> Result<()> {
        Ok(())
    }
    fn draw(&mut self, _: &[f64]) -> Result<()> {
        self.0.lock().unwrap().rows += 1;
        Ok(())
    }
    fn finish(&mut self, chain: &ChainResult) -> Result<()> {
        self.0.lock().unwrap().finished = Some(chain.interrupted);
        Ok(())
    }
    fn failed(&mut self, message: &str) -> Result<()> {
        self.0.lock().unwrap().failure = Some(message.to_string());
        Ok(())
    }
}

#[test]
fn one_failed_chain_stops_the_others_and_every_sink_hears_how_its_chain_ended() {
    for method in methods() {
        one_failed_chain_stops_the_others(method);
    }
}

fn one_failed_chain_stops_the_others(method: Method) {
    // Two chains of many cheap draws on (up to) two threads; evaluation 5000 panics, in
    // whichever chain makes it, long before either could finish.
    let name = method.name();
    let draws = 2_000_000;
    let model = Faulty::new(2, Fault::PanicOnce(5000));
    let config = SampleConfig {
        init: Init::Values(vec![0.1, 0.2]),
        ..config(method, 2, draws)
    };
    let heard = [Heard::default(), Heard::default()];
    let sinks: Vec<Box<dyn DrawSink>> = heard.iter().map(|h| Box::new(h.clone()) as _).collect();
    let err = sample(&model, &config, sinks, &|_, _| {}, None)
        .expect_err("the panic is an error")
        .to_string();
    assert!(
        err.contains("evaluation 5000 failed (at q = ["),
        "{name}: {err}"
    );
    let ends: Vec<Ending> = heard.iter().map(|h| h.0.lock().unwrap().clone()).collect();
    let failed: Vec<&Ending> = ends.iter().filter(|e| e.failure.is_some()).collect();
    assert_eq!(failed.len(), 1, "{name}: one chain failed: {ends:?}");
    assert_eq!(failed[0].failure.as_deref(), Some(err.as_str()));
    assert_eq!(
        failed[0].finished, None,
        "{name}: a failed chain is not finished"
    );
    for end in &ends {
        assert!(
            end.rows < draws,
            "{name}: a chain ran on to {} draws",
            end.rows
        );
        if end.failure.is_none() {
            // Stopped by the failure (or never started, when the pool had one thread).
            assert!(matches!(end.finished, Some(true) | None), "{name}: {end:?}");
        }
    }
}
