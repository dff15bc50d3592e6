//! Chains in lockstep over the data: every chain's exact `U` (and `∇U`) of the moment computed
//! in one pass over the rows, the rows shared out between the chains' threads.
//!
//! A model whose `U` is a sum over data rows ([`RowSum`]) and whose data exceed the caches costs
//! one read of all its data per evaluation; with one read per chain, four chains read the data
//! four times for the same iteration. Here each chain's exact evaluation goes through its
//! [`Member`], which hands the point to the [`Lockstep`] and waits for the *pass*: the requests
//! of all chains still running, gathered at a rendezvous. Every chain of the pass then claims
//! segments (fixed groups of rows) one at a time until none are left, computing each for every
//! point of the pass while its rows are in cache, and finally adds up its own point's segment
//! partials in segment order. That is exactly what [`row_sum::evaluate`] does on one thread, so
//! results, and draws, are the same as without lockstep, bit for bit.
//!
//! # The rendezvous
//! A pass is sealed as soon as every chain that has not left is waiting with a request, or
//! once the first request has waited a quarter of the time the last pass took (its
//! *patience*). Chains in an exact phase arrive within microseconds of each other, their work
//! between two evaluations being one leapfrog update, so the first rule gathers them; a chain
//! busy with something else (a surrogate trajectory, training, an iteration of VHMC's
//! approximate rule without exact evaluations) may take arbitrarily long, and the second rule
//! bounds what waiting for it costs to a quarter of a pass. Which requests share a pass changes
//! no result, only the time.
//!
//! A chain leaves when its [`Member`] is dropped: when it finishes, returns an error, or unwinds
//! from a panic. A panic inside a shared segment (a user model's batched code) fails the pass
//! for every chain in it (they all used that segment) and each of them unwinds with its
//! message, so that no chain waits for a segment that will never be done.
//!
//! Only the chain's own thread joins passes: a call from another thread (a rayon worker of a
//! parallel grid fit inside the chain) evaluates on its own, with the same result.

use std::mem;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use shmc_core::Potential;

use super::{ChainResult, DrawSink, panic_message};
use crate::metric::RiemannianMetric;
use crate::row_sum::{self, Need, Query, RowSum, Total};
use crate::{Error, Model, Result};

/// A chain's point waiting for the next pass.
struct Request {
    point: Vec<f64>,
    need: Need,
}

/// Where one chain is with respect to the rendezvous.
enum Slot {
    /// Between exact evaluations, or inside a pass (computing, or reading its result).
    Running,
    /// Waiting with a request for the next pass.
    Waiting(Request),
    /// Its request is point `index` of a sealed pass the chain has not picked up yet.
    Sealed(Arc<Pass>, usize),
    /// Gone: the pass never waits for it again.
    Left,
}

/// The chains' slots, and since when the oldest waiting request has waited.
struct Rendezvous {
    slots: Vec<Slot>,
    waiting_since: Option<Instant>,
}

/// Per segment, a pass's records: `1 + d` numbers per point, as [`RowSum::segment`] writes
/// them.
type Partials = Vec<RwLock<Vec<f64>>>;

/// One shared pass: the points, the next segment to claim, how many are done, and the
/// partials.
struct Pass {
    requests: Vec<Request>,
    /// The requests' [`RowSum::segment_point`]s, mapped once for every thread of the pass.
    segment_points: Vec<Option<Vec<f64>>>,
    partials: Partials,
    sealed_at: Instant,
    next: AtomicUsize,
    progress: Mutex<Progress>,
    done: Condvar,
}

/// Segments finished, or the message of the panic that failed the pass.
#[derive(Default)]
struct Progress {
    finished: usize,
    failure: Option<String>,
}

/// The patience before the first pass has been timed: 1 ms, a pass over some 10 MB.
const INITIAL_PATIENCE_NANOS: u64 = 1_000_000;

/// Locks `mutex`, ignoring poisoning: nothing here panics while holding a lock (a model's
/// panic is caught before its segment's lock is released).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The rendezvous of `chains` chains on one [`RowSum`] model.
pub struct Lockstep<'m, M: ?Sized> {
    model: &'m M,
    sum: &'m dyn RowSum,
    dim: usize,
    rendezvous: Mutex<Rendezvous>,
    sealed: Condvar,
    /// How long (in nanoseconds) a request waits for the others before its pass goes without
    /// them: a quarter of the last pass.
    patience: AtomicU64,
    /// The number of segments of the model's row sum.
    segments: usize,
    /// Partials of passes whose chains have all read their results, for the next passes to
    /// reuse (a pass may start while the one before is still being read).
    spare: Mutex<Vec<Partials>>,
    seated: AtomicBool,
}

impl<'m, M: Model + ?Sized> Lockstep<'m, M> {
    /// The rendezvous for `chains` chains on `model`, or `None` if the model's `U` is not a
    /// [`RowSum`].
    pub fn new(model: &'m M, chains: usize) -> Option<Self> {
        let sum = model.row_sum()?;
        Some(Self {
            model,
            sum,
            dim: model.dim(),
            rendezvous: Mutex::new(Rendezvous {
                slots: (0..chains).map(|_| Slot::Running).collect(),
                waiting_since: None,
            }),
            sealed: Condvar::new(),
            patience: AtomicU64::new(INITIAL_PATIENCE_NANOS),
            segments: sum.segments(),
            spare: Mutex::new(Vec::new()),
            seated: AtomicBool::new(false),
        })
    }

    /// One seat per chain, in chain order; a second call returns none. A chain that never takes
    /// its seat must drop it, so that the others stop waiting for it.
    pub fn seats(&self) -> Vec<Seat<'_, 'm, M>> {
        if self.seated.swap(true, Ordering::Relaxed) {
            return Vec::new();
        }
        (0..lock(&self.rendezvous).slots.len())
            .map(|slot| Seat {
                lockstep: self,
                slot,
            })
            .collect()
    }

    /// Runs `run(member, chain, sink)` for every chain (numbered from 1) on a thread of its
    /// own, so that all of them take part in passes however few cores rayon has, and returns
    /// their results in chain order (the first error in chain order, if any).
    pub(super) fn run<F>(&self, sinks: Vec<Box<dyn DrawSink>>, run: F) -> Result<Vec<ChainResult>>
    where
        F: Fn(&Member<'_, 'm, M>, usize, &mut dyn DrawSink) -> Result<ChainResult> + Sync,
    {
        let results: Vec<Result<ChainResult>> = thread::scope(|scope| {
            let handles: Vec<_> = self
                .seats()
                .into_iter()
                .zip(sinks)
                .enumerate()
                .map(|(i, (seat, mut sink))| {
                    let run = &run;
                    // A thread that cannot start drops its closure, and with it the seat.
                    thread::Builder::new()
                        .name(format!("chain {}", i + 1))
                        .spawn_scoped(scope, move || run(&seat.take(), i + 1, sink.as_mut()))
                        .map_err(|e| Error::invalid(format!("chain {}: no thread: {e}", i + 1)))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(i, handle)| {
                    handle?.join().unwrap_or_else(|payload| {
                        Err(Error::invalid(format!(
                            "chain {}: {}",
                            i + 1,
                            panic_message(payload.as_ref())
                        )))
                    })
                })
                .collect()
        });
        results.into_iter().collect()
    }

    /// Chain `slot`'s evaluation at `point`: joins the next pass, computes its share of it,
    /// and adds up its own result.
    fn evaluate(&self, slot: usize, point: &[f64], need: Need, grad: &mut [f64]) -> f64 {
        let (pass, index) = self.join(slot, point, need);
        if let Err(message) = self.compute(&pass) {
            resume_unwind(Box::new(message));
        }
        let width = 1 + self.dim;
        let mut total = Total::new(need, grad);
        for partial in &pass.partials {
            let partial = partial.read().unwrap_or_else(PoisonError::into_inner);
            total.add(&partial[index * width..(index + 1) * width]);
        }
        // The last chain to read the pass keeps its buffers for the passes to come.
        if let Ok(pass) = Arc::try_unwrap(pass) {
            lock(&self.spare).push(pass.partials);
        }
        total.finish(self.sum, point)
    }

    /// Puts chain `slot`'s request in and waits until it is sealed into a pass; returns the
    /// pass and the request's index in it.
    fn join(&self, slot: usize, point: &[f64], need: Need) -> (Arc<Pass>, usize) {
        let mut rendezvous = lock(&self.rendezvous);
        rendezvous.slots[slot] = Slot::Waiting(Request {
            point: point.to_vec(),
            need,
        });
        let since = *rendezvous.waiting_since.get_or_insert_with(Instant::now);
        if rendezvous
            .slots
            .iter()
            .all(|s| matches!(s, Slot::Waiting(_) | Slot::Left))
        {
            self.seal(&mut rendezvous);
        }
        loop {
            match mem::replace(&mut rendezvous.slots[slot], Slot::Running) {
                Slot::Sealed(pass, index) => return (pass, index),
                waiting => rendezvous.slots[slot] = waiting,
            }
            // Since when the oldest request of the coming pass waits (ours, or an earlier one).
            let since = rendezvous.waiting_since.unwrap_or(since);
            let patience = Duration::from_nanos(self.patience.load(Ordering::Relaxed));
            match patience.checked_sub(since.elapsed()) {
                Some(left) if !left.is_zero() => {
                    rendezvous = self
                        .sealed
                        .wait_timeout(rendezvous, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                _ => self.seal(&mut rendezvous),
            }
        }
    }

    /// Seals the waiting requests into a pass and wakes their chains.
    fn seal(&self, rendezvous: &mut Rendezvous) {
        let mut members = Vec::new();
        let mut requests = Vec::new();
        for (i, s) in rendezvous.slots.iter_mut().enumerate() {
            if matches!(s, Slot::Waiting(_))
                && let Slot::Waiting(request) = mem::replace(s, Slot::Running)
            {
                members.push(i);
                requests.push(request);
            }
        }
        rendezvous.waiting_since = None;
        let partials = lock(&self.spare).pop().unwrap_or_else(|| {
            (0..self.segments)
                .map(|_| RwLock::new(Vec::new()))
                .collect()
        });
        let segment_points = requests
            .iter()
            .map(|r| self.sum.segment_point(&r.point))
            .collect();
        let pass = Arc::new(Pass {
            requests,
            segment_points,
            partials,
            sealed_at: Instant::now(),
            next: AtomicUsize::new(0),
            progress: Mutex::new(Progress::default()),
            done: Condvar::new(),
        });
        for (index, i) in members.into_iter().enumerate() {
            rendezvous.slots[i] = Slot::Sealed(Arc::clone(&pass), index);
        }
        self.sealed.notify_all();
    }

    /// Claims and computes segments of `pass` until none are left, then waits for the others'
    /// segments; the message of a panic if any segment's computation panicked.
    fn compute(&self, pass: &Pass) -> Result<(), String> {
        let queries: Vec<Query<'_>> = pass
            .requests
            .iter()
            .map(|r| Query {
                point: &r.point,
                need: r.need,
            })
            .collect();
        let queries = row_sum::mapped_queries(&queries, &pass.segment_points);
        let width = queries.len() * (1 + self.dim);
        let segments = self.segments;
        loop {
            let index = pass.next.fetch_add(1, Ordering::Relaxed);
            if index >= segments {
                break;
            }
            let outcome = {
                let mut out = pass.partials[index]
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                out.resize(width, 0.0);
                catch_unwind(AssertUnwindSafe(|| {
                    self.sum.segment(index, &queries, &mut out)
                }))
            };
            let mut progress = lock(&pass.progress);
            match outcome {
                Ok(()) => progress.finished += 1,
                Err(payload) => {
                    progress.failure = Some(panic_message(payload.as_ref()));
                }
            }
            if progress.finished == segments {
                let quarter = pass.sealed_at.elapsed().as_nanos() / 4;
                self.patience.store(
                    u64::try_from(quarter).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
            }
            if progress.finished == segments || progress.failure.is_some() {
                pass.done.notify_all();
            }
            if progress.failure.is_some() {
                break;
            }
        }
        let mut progress = lock(&pass.progress);
        while progress.finished < segments && progress.failure.is_none() {
            progress = pass
                .done
                .wait(progress)
                .unwrap_or_else(PoisonError::into_inner);
        }
        progress.failure.clone().map_or(Ok(()), Err)
    }

    /// Chain `slot` is gone: no pass waits for it again.
    fn leave(&self, slot: usize) {
        let mut rendezvous = lock(&self.rendezvous);
        rendezvous.slots[slot] = Slot::Left;
        let slots = &rendezvous.slots;
        if slots
            .iter()
            .all(|s| matches!(s, Slot::Waiting(_) | Slot::Left))
            && slots.iter().any(|s| matches!(s, Slot::Waiting(_)))
        {
            self.seal(&mut rendezvous);
        }
    }
}

/// A chain's place in a [`Lockstep`], before the chain's thread takes it. Dropping it (or the
/// [`Member`] it becomes) takes the chain out of the rendezvous.
pub struct Seat<'l, 'm, M: Model + ?Sized> {
    lockstep: &'l Lockstep<'m, M>,
    slot: usize,
}

impl<'l, 'm, M: Model + ?Sized> Seat<'l, 'm, M> {
    /// The chain's model, bound to the calling thread: its exact evaluations on this thread go
    /// through the rendezvous.
    pub fn take(self) -> Member<'l, 'm, M> {
        Member {
            seat: self,
            owner: thread::current().id(),
        }
    }
}

impl<M: Model + ?Sized> Drop for Seat<'_, '_, M> {
    fn drop(&mut self) {
        self.lockstep.leave(self.slot);
    }
}

/// One chain's view of the model in lockstep: a [`Model`] whose exact evaluations on the
/// chain's thread are shared passes, and which names, reports and counts as the model does.
pub struct Member<'l, 'm, M: Model + ?Sized> {
    seat: Seat<'l, 'm, M>,
    owner: ThreadId,
}

impl<M: Model + ?Sized> Member<'_, '_, M> {
    fn evaluate(&self, q: &[f64], need: Need, grad: &mut [f64]) -> f64 {
        let lockstep = self.seat.lockstep;
        // Checked here, before the point reaches a pass where it would fail every chain.
        assert_eq!(q.len(), lockstep.dim, "the point has the wrong dimension");
        if need.gradient() {
            assert_eq!(
                grad.len(),
                lockstep.dim,
                "the gradient buffer has the wrong dimension"
            );
        }
        if thread::current().id() == self.owner {
            lockstep.evaluate(self.seat.slot, q, need, grad)
        } else {
            row_sum::evaluate(lockstep.sum, q, need, grad)
        }
    }
}

impl<M: Model + ?Sized> Potential for Member<'_, '_, M> {
    fn dim(&self) -> usize {
        self.seat.lockstep.dim
    }

    fn value(&self, q: &[f64]) -> f64 {
        self.evaluate(q, Need::Value, &mut [])
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        self.evaluate(q, Need::ValueAndGradient, grad)
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        self.evaluate(q, Need::Gradient, grad);
    }
}

impl<M: Model + ?Sized> Model for Member<'_, '_, M> {
    fn parameter_names(&self) -> Vec<String> {
        self.seat.lockstep.model.parameter_names()
    }

    fn write_parameters(&self, q: &[f64], out: &mut Vec<f64>) {
        self.seat.lockstep.model.write_parameters(q, out);
    }

    fn notes(&self) -> Vec<String> {
        self.seat.lockstep.model.notes()
    }

    fn work(&self) -> Vec<(&'static str, u64)> {
        self.seat.lockstep.model.work()
    }

    fn failure(&self) -> Option<String> {
        self.seat.lockstep.model.failure()
    }

    /// The model's own metric: it reads the data itself, outside the shared passes.
    fn riemannian_metric(&self, start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        self.seat.lockstep.model.riemannian_metric(start)
    }

    fn bytes_per_chain(&self) -> u128 {
        self.seat.lockstep.model.bytes_per_chain()
    }
}
