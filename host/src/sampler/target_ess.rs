//! Sampling until the posterior is good enough: every parameter's bulk and tail ESS, over all
//! chains together, at least a target (CmdStan users check 400), instead of a fixed number of
//! draws.
//!
//! The chains check together every [`EssMonitor::every`] kept draws: each hands over its
//! latest block and waits until every running chain has, the last to arrive computes the ESS
//! over everything so far, and all go on or all stop. So the chains always hold the same
//! number of draws (what CmdStan's readers expect), and the decision depends only on the
//! draws, never on which thread was faster: a run stops at the same draw for the same seed.
//! A chain that ends for any other reason (the maximum, an error, an interrupt) leaves the
//! check, and the others no longer wait for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::ChainResult;
use crate::diagnostics::{Draws, ess_bulk, ess_tail};

/// What the chains do after a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Sample another block.
    Continue,
    /// The target is reached: stop.
    Stop,
}

/// Where a run stood at its last check.
#[derive(Clone, Debug, PartialEq)]
pub struct EssCheck {
    /// Kept draws per chain at the check.
    pub draws: usize,
    /// The smallest bulk ESS over the parameters, and the parameter's index.
    pub bulk: (f64, usize),
    /// The smallest tail ESS over the parameters, and the parameter's index.
    pub tail: (f64, usize),
    /// Whether both reached the target.
    pub reached: bool,
}

/// The chains' shared check of a target ESS.
#[derive(Debug)]
pub struct EssMonitor {
    target: f64,
    every: usize,
    state: Mutex<Shared>,
    arrived: Condvar,
}

#[derive(Debug)]
struct Shared {
    /// `draws[chain][parameter]`, by 0-based chain.
    draws: Vec<Vec<Vec<f64>>>,
    /// Which chains still take part.
    running: Vec<bool>,
    /// Which running chains have handed over the current block.
    waiting: Vec<bool>,
    /// Counts checks, so that a waiting chain sees when its check is decided.
    round: u64,
    stop: bool,
    last: Option<EssCheck>,
}

impl EssMonitor {
    /// A check of `target` every `every` kept draws, for `chains` chains of `parameters`.
    pub fn new(target: f64, every: usize, chains: usize, parameters: usize) -> Self {
        Self {
            target,
            every: every.max(1),
            state: Mutex::new(Shared {
                draws: vec![vec![Vec::new(); parameters]; chains],
                running: vec![true; chains],
                waiting: vec![false; chains],
                round: 0,
                stop: false,
                last: None,
            }),
            arrived: Condvar::new(),
        }
    }

    /// Kept draws between checks.
    pub fn every(&self) -> usize {
        self.every
    }

    /// The latest check, if one was made.
    pub fn last_check(&self) -> Option<EssCheck> {
        self.lock().last.clone()
    }

    /// Chain `chain` (1-based) has finished a block: hands its new draws over, waits for the
    /// other running chains (or an interrupt), and returns what all of them do next.
    pub fn block_done(
        &self,
        chain: usize,
        result: &ChainResult,
        interrupt: &AtomicBool,
    ) -> Verdict {
        let mut shared = self.lock();
        let index = chain - 1;
        for (p, kept) in shared.draws[index].iter_mut().enumerate() {
            let all = result.parameter(p);
            kept.extend_from_slice(&all[kept.len()..]);
        }
        shared.waiting[index] = true;
        let round = shared.round;
        self.decide_if_complete(&mut shared);
        while shared.round == round {
            if interrupt.load(Ordering::Relaxed) {
                return Verdict::Stop;
            }
            shared = self
                .arrived
                .wait_timeout(shared, Duration::from_millis(50))
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        if shared.stop {
            Verdict::Stop
        } else {
            Verdict::Continue
        }
    }

    /// Chain `chain` (1-based) takes no further part.
    pub fn leave(&self, chain: usize) {
        let mut shared = self.lock();
        shared.running[chain - 1] = false;
        shared.waiting[chain - 1] = false;
        self.decide_if_complete(&mut shared);
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// When every running chain waits: checks the ESS over the common draws and wakes them.
    fn decide_if_complete(&self, shared: &mut Shared) {
        let running = shared.running.iter().filter(|&&r| r).count();
        let waiting = shared.waiting.iter().filter(|&&w| w).count();
        if waiting == 0 || waiting < running {
            return;
        }
        let check = self.check(shared);
        shared.stop = check.reached;
        shared.last = Some(check);
        shared.waiting.fill(false);
        shared.round += 1;
        self.arrived.notify_all();
    }

    /// The ESS over the waiting chains' draws.
    fn check(&self, shared: &Shared) -> EssCheck {
        let chains: Vec<&Vec<Vec<f64>>> = shared
            .draws
            .iter()
            .zip(&shared.waiting)
            .filter(|(_, w)| **w)
            .map(|(d, _)| d)
            .collect();
        let draws = chains.iter().map(|c| c[0].len()).min().unwrap_or(0);
        let parameters = chains.first().map_or(0, |c| c.len());
        check_ess(
            parameters,
            |p| chains.iter().map(|c| &c[p][..draws]).collect(),
            self.target,
        )
    }
}

/// The smallest bulk and tail ESS over `parameters` parameters, whose draws `series(p)` gives
/// chain by chain (all of one length), against `target`. A parameter whose ESS cannot be
/// computed (too few or constant draws) counts as not reaching it.
pub fn check_ess<'a>(
    parameters: usize,
    series: impl Fn(usize) -> Vec<&'a [f64]>,
    target: f64,
) -> EssCheck {
    let mut draws = 0;
    let (mut bulk, mut tail) = ((f64::INFINITY, 0), (f64::INFINITY, 0));
    for p in 0..parameters {
        let chains = series(p);
        draws = chains.first().map_or(0, |c| c.len());
        let (b, t) = Draws::new(&chains).map_or((0.0, 0.0), |d| (ess_bulk(&d), ess_tail(&d)));
        let (b, t) = (
            if b.is_nan() { 0.0 } else { b },
            if t.is_nan() { 0.0 } else { t },
        );
        if b < bulk.0 {
            bulk = (b, p);
        }
        if t < tail.0 {
            tail = (t, p);
        }
    }
    EssCheck {
        draws,
        bulk,
        tail,
        reached: bulk.0 >= target && tail.0 >= target,
    }
}
