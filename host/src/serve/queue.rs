//! The bounded queue in front of the server's workers. A request's evaluation waits here for a
//! worker; when the queue is full the request is refused at once (the server sheds load with a
//! 503 instead of letting requests pile up where no clock runs), and one whose time limit
//! passes while it waits is dropped unevaluated, so a worker never spends itself on an answer
//! nobody is waiting for.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::{Error, Result};

/// A job not yet taken by a worker.
const WAITING: u8 = 0;
/// A job a worker has started.
const STARTED: u8 = 1;
/// A job whose request gave up waiting before a worker took it.
const ABANDONED: u8 = 2;

/// An evaluation queued for a worker, with who has claimed it.
struct Job {
    claim: Arc<AtomicU8>,
    run: Box<dyn FnOnce() + Send>,
}

/// The sending end of the queue; the workers end when it is dropped.
pub(super) struct Queue(SyncSender<Job>);

/// How a queued evaluation ended for the request that asked for it.
pub(super) enum Outcome {
    /// The model's result (or its error).
    Done(Result<Vec<f64>>),
    /// The queue was full: not queued.
    Full,
    /// The time limit passed before a worker took it: not evaluated.
    Expired,
    /// A worker took it but had not finished by the time limit (it finishes regardless).
    Overran,
}

impl Queue {
    /// A queue of `capacity` evaluations (0: only as many as workers wait for) in front of
    /// `workers` threads.
    pub(super) fn start(workers: usize, capacity: usize) -> Self {
        let (jobs, queue) = sync_channel::<Job>(capacity);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..workers {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || work(&queue));
        }
        Self(jobs)
    }

    /// Queues `evaluation` and waits for it until `deadline`.
    pub(super) fn run(
        &self,
        deadline: Instant,
        evaluation: impl FnOnce() -> Result<Vec<f64>> + Send + 'static,
    ) -> Outcome {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Outcome::Expired;
        };
        let (done, result) = sync_channel(1);
        let claim = Arc::new(AtomicU8::new(WAITING));
        let job = Job {
            claim: Arc::clone(&claim),
            run: Box::new(move || {
                // A model that panics fails its request, not the worker.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(evaluation))
                    .unwrap_or_else(|_| Err(Error::invalid("the model panicked at this input")));
                // The request may have timed out and gone.
                let _ = done.send(outcome);
            }),
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.0.try_send(job) {
            return Outcome::Full;
        }
        match result.recv_timeout(left) {
            Ok(outcome) => Outcome::Done(outcome),
            Err(_) => match claim.compare_exchange(
                WAITING,
                ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => Outcome::Expired,
                Err(_) => Outcome::Overran,
            },
        }
    }
}

/// A worker: runs queued evaluations, skipping abandoned ones, until the queue closes.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = match queue.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let claimed = job
            .claim
            .compare_exchange(WAITING, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if claimed {
            (job.run)();
        }
    }
}
