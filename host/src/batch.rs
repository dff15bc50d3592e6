//! Batches of independent exact evaluations (the Laplace draws a surrogate trains on, the
//! Hessian's gradient columns at the MAP, a grid's nodes) run on enough threads to keep every
//! instance of a served model busy.
//!
//! Rayon's global pool has one thread per core of this machine. That suits a model evaluated in
//! process, whose calls are CPU work here; a served model's call is a thread waiting on HTTP
//! while another machine computes, so 8 instances behind a 2-core driver would see only 2 calls
//! at a time. A model that serves more calls at once than this machine has cores says so
//! ([`crate::Model::concurrency`]) and its batches get a pool of that many threads. A waiting
//! thread costs a stack and no CPU. Every batch collects its results in order, so they do not
//! depend on how many threads computed them.

use crate::{Error, Result};

/// The stack of one batch thread, as rayon's default (std's 2 MiB), set explicitly so that the
/// memory a pool of `n` threads reserves is known before it is built ([`stack_bytes`]).
const STACK_BYTES: usize = 2 << 20;

/// The bytes of stack `threads` batch threads reserve (`None` on overflow), for
/// [`crate::memory::check`].
pub fn stack_bytes(threads: usize) -> Option<u128> {
    (threads as u128).checked_mul(STACK_BYTES as u128)
}

/// `work`, whose parallel iterators are one batch of independent calls into a model that can
/// serve `concurrency` calls at once (`None`: as many as the current pool has threads), run on
/// a pool of `max(threads of the current pool, concurrency)` threads, built for this batch.
/// With no more than the current pool's threads to ask for, `work` runs where it is, exactly as
/// without this function.
pub fn spread<R: Send>(concurrency: Option<usize>, work: impl FnOnce() -> R + Send) -> Result<R> {
    let threads = match concurrency {
        Some(n) if n > rayon::current_num_threads() => n,
        _ => return Ok(work()),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(STACK_BYTES)
        .thread_name(|i| format!("shmc-batch-{i}"))
        .build()
        .map_err(|e| {
            Error::invalid(format!(
                "could not start the {threads} threads that keep the model's instances busy: {e}"
            ))
        })?;
    Ok(pool.install(work))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    /// The most threads one batch had at work at once, each item waiting (at most a few
    /// seconds, so that a narrower pool fails rather than hangs) until `wanted` are.
    fn widest(concurrency: Option<usize>, items: usize, wanted: usize) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        spread(concurrency, || {
            (0..items).into_par_iter().for_each(|_| {
                peak.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let start = std::time::Instant::now();
                while peak.load(Ordering::SeqCst) < wanted
                    && start.elapsed() < std::time::Duration::from_secs(3)
                {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                now.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .unwrap();
        peak.into_inner()
    }

    #[test]
    fn a_batch_runs_as_wide_as_the_model_serves_and_no_narrower_than_the_machine() {
        let served = rayon::current_num_threads() + 2;
        assert_eq!(widest(Some(served), 2 * served, served), served);
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let width = |n| three.install(|| spread(n, rayon::current_num_threads).unwrap());
        assert_eq!((width(None), width(Some(2)), width(Some(5))), (3, 3, 5));
    }

    #[test]
    fn a_batchs_results_come_in_order_whatever_the_threads() {
        let square = |n| spread(n, || (0..100u64).into_par_iter().map(|i| i * i).collect());
        let wide: Vec<u64> = square(Some(rayon::current_num_threads() + 5)).unwrap();
        assert_eq!(wide, square(None).unwrap());
        assert_eq!(wide[7], 49);
    }
}
