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
//! A pass is sealed as soon as no running chain is outside it, that is every chain that has not
//! left is waiting with a request, or has *passed*: finished an iteration while others waited
//! (an iteration without exact evaluations, under VHMC's approximate rule or while a surrogate
//! trains), so that a chain never waits for the others longer than one of their iterations.
//! A chain leaves when its [`Member`] is dropped: when it finishes, returns an error, or unwinds
//! from a panic. A panic inside a shared segment (a user model's batched code) fails the pass
//! for every chain in it (they all used that segment) and each of them unwinds with its message,
//! so that no chain waits for a segment that will never be done.
//!
//! Only the chain's own thread joins passes: a call from another thread (a rayon worker of a
//! parallel grid fit inside the chain) evaluates on its own, with the same result.

use std::mem;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::{self, ThreadId};

use shmc_core::Potential;

use super::{ChainResult, DrawSink, panic_message};
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
    /// Finished an iteration while others were waiting: the next pass goes without it.
    Passed,
    /// Its request is point `index` of a sealed pass the chain has not picked up yet.
    Sealed(Arc<Pass>, usize),
    /// Gone: the pass never waits for it again.
    Left,
}

/// One shared pass: the points, the next segment to claim, and how many are done.
struct Pass {
    requests: Vec<Request>,
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
    slots: Mutex<Vec<Slot>>,
    sealed: Condvar,
    /// Per segment, the last pass's records (`1 + d` numbers per point); a pass is sealed only
    /// when every chain of the one before has read its result, so one set is enough.
    partials: Vec<RwLock<Vec<f64>>>,
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
            slots: Mutex::new((0..chains).map(|_| Slot::Running).collect()),
            sealed: Condvar::new(),
            partials: (0..sum.segments())
                .map(|_| RwLock::new(Vec::new()))
                .collect(),
            seated: AtomicBool::new(false),
        })
    }

    /// One seat per chain, in chain order; a second call returns none. A chain that never takes
    /// its seat must drop it, so that the others stop waiting for it.
    pub fn seats(&self) -> Vec<Seat<'_, 'm, M>> {
        if self.seated.swap(true, Ordering::Relaxed) {
            return Vec::new();
        }
        (0..lock(&self.slots).len())
            .map(|slot| Seat {
                lockstep: self,
                slot,
            })
            .collect()
    }

    /// Runs `run(member, chain, sink, progress)` for every chain (numbered from 1) on a thread
    /// of its own, so that all of them take part in every pass however few cores rayon has,
    /// and returns their results in chain order (the first error in chain order, if any).
    /// `progress` is called after every iteration, as [`super::sample`] promises.
    pub(super) fn run<F>(
        &self,
        sinks: Vec<Box<dyn DrawSink>>,
        progress: &(dyn Fn(usize, usize) + Sync),
        run: F,
    ) -> Result<Vec<ChainResult>>
    where
        F: Fn(
                &Member<'_, 'm, M>,
                usize,
                &mut dyn DrawSink,
                &(dyn Fn(usize, usize) + Sync),
            ) -> Result<ChainResult>
            + Sync,
    {
        let tick = |chain: usize, done: usize| {
            self.iteration_done(chain - 1);
            progress(chain, done);
        };
        let results: Vec<Result<ChainResult>> = thread::scope(|scope| {
            let handles: Vec<_> = self
                .seats()
                .into_iter()
                .zip(sinks)
                .enumerate()
                .map(|(i, (seat, mut sink))| {
                    let (run, tick) = (&run, &tick);
                    // A thread that cannot start drops its closure, and with it the seat.
                    thread::Builder::new()
                        .name(format!("chain {}", i + 1))
                        .spawn_scoped(scope, move || run(&seat.take(), i + 1, sink.as_mut(), tick))
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
        for partial in &self.partials {
            let partial = partial.read().unwrap_or_else(PoisonError::into_inner);
            total.add(&partial[index * width..(index + 1) * width]);
        }
        total.finish(self.sum, point)
    }

    /// Puts chain `slot`'s request in and waits until it is sealed into a pass; returns the
    /// pass and the request's index in it.
    fn join(&self, slot: usize, point: &[f64], need: Need) -> (Arc<Pass>, usize) {
        let mut slots = lock(&self.slots);
        slots[slot] = Slot::Waiting(Request {
            point: point.to_vec(),
            need,
        });
        self.seal_if_ready(&mut slots);
        loop {
            match mem::replace(&mut slots[slot], Slot::Running) {
                Slot::Sealed(pass, index) => return (pass, index),
                waiting => slots[slot] = waiting,
            }
            slots = self
                .sealed
                .wait(slots)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Seals the waiting requests into a pass if no chain still running is outside it.
    fn seal_if_ready(&self, slots: &mut [Slot]) {
        let ready = slots
            .iter()
            .all(|s| matches!(s, Slot::Waiting(_) | Slot::Passed | Slot::Left));
        if !ready || !slots.iter().any(|s| matches!(s, Slot::Waiting(_))) {
            return;
        }
        let mut members = Vec::new();
        let mut requests = Vec::new();
        for (i, s) in slots.iter_mut().enumerate() {
            match mem::replace(s, Slot::Running) {
                Slot::Waiting(request) => {
                    members.push(i);
                    requests.push(request);
                }
                Slot::Left => *s = Slot::Left,
                // Passed: it runs on. (Nothing else is ready.)
                _ => {}
            }
        }
        let pass = Arc::new(Pass {
            requests,
            next: AtomicUsize::new(0),
            progress: Mutex::new(Progress::default()),
            done: Condvar::new(),
        });
        for (index, i) in members.into_iter().enumerate() {
            slots[i] = Slot::Sealed(Arc::clone(&pass), index);
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
        let width = queries.len() * (1 + self.dim);
        let segments = self.partials.len();
        loop {
            let index = pass.next.fetch_add(1, Ordering::Relaxed);
            if index >= segments {
                break;
            }
            let outcome = {
                let mut out = self.partials[index]
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

    /// Chain `slot` finished an iteration: if others are waiting, the next pass goes without
    /// it.
    fn iteration_done(&self, slot: usize) {
        let mut slots = lock(&self.slots);
        if matches!(slots[slot], Slot::Running)
            && slots.iter().any(|s| matches!(s, Slot::Waiting(_)))
        {
            slots[slot] = Slot::Passed;
            self.seal_if_ready(&mut slots);
        }
    }

    /// Chain `slot` is gone: no pass waits for it again.
    fn leave(&self, slot: usize) {
        let mut slots = lock(&self.slots);
        slots[slot] = Slot::Left;
        self.seal_if_ready(&mut slots);
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
}
