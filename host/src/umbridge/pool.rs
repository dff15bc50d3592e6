//! Several served instances of one model (each its own server or process), sharing the calls
//! of every chain in flight: a load balancer for a few servers.
//!
//! Each call goes to the instance with the fewest calls in flight, ties taken in turn. Not
//! chain `k` to instance `k mod n`: a model's `U` does not know its chain, chains call at
//! different rates (a surrogate chain rarely, a warmup search or a grid's precomputation from
//! one thread), and counting what is in flight keeps every instance busy in all of these
//! (4 chains on 2 instances settle at 2 calls each) with one atomic counter per instance. With
//! one instance every call goes to it, as if there were no pool.
//!
//! A pool of a fixed list (`--url A,B`) keeps its instances: one that fails ends the run. A
//! pool read from a [`Folder`] that an engine fills is replaceable: an instance that can no
//! longer be reached is dropped and named, the call goes to another, and a replacement the
//! engine starts (its URL file rewritten) joins when the folder is next read. Every call is a
//! pure function of its input, so where it is answered changes no draw.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use super::client::{Client, Patience};
use super::discovery::{Folder, POLL};
use crate::{Error, Result};

/// One instance: its client and its counts.
#[derive(Debug)]
struct Slot {
    /// Its place in the folder (`None` in a fixed list).
    index: Option<usize>,
    client: Client,
    in_flight: AtomicUsize,
    /// Leases whose caller said they were answered.
    answered: AtomicU64,
    /// Dropped: unreachable, or replaced by a newer URL of the same instance.
    gone: AtomicBool,
}

impl Slot {
    fn new(index: Option<usize>, client: Client) -> Arc<Self> {
        Arc::new(Self {
            index,
            client,
            in_flight: AtomicUsize::new(0),
            answered: AtomicU64::new(0),
            gone: AtomicBool::new(false),
        })
    }
}

/// The instances of one served model; see the module's documentation.
#[derive(Debug)]
pub struct Pool {
    slots: RwLock<Vec<Arc<Slot>>>,
    /// Where the next search for the least busy instance starts, so that ties rotate.
    turn: AtomicUsize,
    /// The folder a replaceable pool reads, and the patience of the clients it makes.
    folder: Option<(Folder, Patience)>,
    /// What happened to instances during the run, one sentence each.
    history: Mutex<Vec<String>>,
    /// The instances the pool serves with: the fixed list's, or the folder's manifest's.
    capacity: usize,
    /// Calls in flight over all instances, now and at most.
    in_flight: Arc<InFlight>,
}

/// Calls in flight over all of a pool's instances: now, and the most at once so far.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// One instance of a [`Pool`], leased for one evaluation (its value, and its gradient on the
/// same instance); dropping it ends the lease.
#[derive(Debug)]
pub struct Lease {
    slot: Arc<Slot>,
    in_flight: Arc<InFlight>,
}

impl Pool {
    /// A pool of the fixed list `clients`, at least one.
    pub fn new(clients: Vec<Client>) -> Self {
        assert!(!clients.is_empty(), "a pool needs an instance");
        Self::with(
            clients.into_iter().map(|c| Slot::new(None, c)).collect(),
            None,
        )
    }

    /// A replaceable pool of the instances in `folder`, `clients[i]` being instance `i`.
    pub fn from_folder(folder: Folder, patience: Patience, clients: Vec<Client>) -> Self {
        let slots = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| Slot::new(Some(i), c))
            .collect();
        Self::with(slots, Some((folder, patience)))
    }

    fn with(slots: Vec<Arc<Slot>>, folder: Option<(Folder, Patience)>) -> Self {
        Self {
            capacity: slots.len(),
            in_flight: Arc::default(),
            slots: RwLock::new(slots),
            turn: AtomicUsize::new(0),
            folder,
            history: Mutex::new(Vec::new()),
        }
    }

    /// How many instances the pool serves with: the fixed list's, or the folder's manifest's
    /// (what the engine was asked for), all of them once the pool starts. Not the live count:
    /// an instance that dies is restarted by the engine, and the width of a batch sized on
    /// this stays the same meanwhile (two calls wait on one instance instead).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The most calls that were in flight at once over all instances.
    pub fn peak_in_flight(&self) -> usize {
        self.in_flight.peak.load(Ordering::Relaxed)
    }

    /// Whether an instance that cannot be reached is dropped rather than ending the run.
    pub fn replaceable(&self) -> bool {
        self.folder.is_some()
    }

    /// The live instances' URLs, in the order they joined.
    pub fn urls(&self) -> Vec<String> {
        self.live()
            .iter()
            .map(|s| s.client.url().to_string())
            .collect()
    }

    /// The folder a replaceable pool reads.
    pub fn folder(&self) -> Option<&Folder> {
        self.folder.as_ref().map(|(f, _)| f)
    }

    fn live(&self) -> Vec<Arc<Slot>> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .filter(|s| !s.gone.load(Ordering::Relaxed))
            .cloned()
            .collect()
    }

    /// The live instance with the fewest calls in flight, ties taken in turn. Two threads may
    /// pick the same one at the same moment; the balance is a heuristic, not a guarantee. A
    /// replaceable pool with no live instance reads its folder until one is back, and fails
    /// after the folder's ready time.
    pub fn lease(&self) -> Result<Lease> {
        let start = Instant::now();
        loop {
            let live = self.live();
            if !live.is_empty() {
                let n = live.len();
                let first = self.turn.fetch_add(1, Ordering::Relaxed) % n;
                let slot = (first..first + n)
                    .map(|i| &live[i % n])
                    .min_by_key(|s| s.in_flight.load(Ordering::Relaxed))
                    .unwrap_or(&live[0]);
                slot.in_flight.fetch_add(1, Ordering::Relaxed);
                let now = self.in_flight.now.fetch_add(1, Ordering::Relaxed) + 1;
                self.in_flight.peak.fetch_max(now, Ordering::Relaxed);
                return Ok(Lease {
                    slot: slot.clone(),
                    in_flight: Arc::clone(&self.in_flight),
                });
            }
            let Some((folder, _)) = &self.folder else {
                return Err(Error::invalid("no instance of the served model is left"));
            };
            if start.elapsed() >= folder.ready() {
                return Err(Error::invalid(format!(
                    "every model instance in {} stopped answering and none was restarted \
                     within {} s",
                    folder.dir().display(),
                    folder.ready().as_secs_f64()
                )));
            }
            std::thread::sleep(POLL);
            self.read_folder()?;
        }
    }

    /// Drops the leased instance, which could not be reached (`why`), and reads the folder for
    /// a replacement. A fixed list never drops one.
    pub fn drop_instance(&self, lease: &Lease, why: &Error) -> Result<()> {
        let Some((folder, _)) = &self.folder else {
            return Ok(());
        };
        let slot = &lease.slot;
        if !slot.gone.swap(true, Ordering::Relaxed) {
            let name = slot.index.map_or_else(String::new, |i| folder.name(i));
            self.note(format!(
                "{name} at {} stopped answering after {} calls ({why}): dropped, its calls \
                 answered by the other instances",
                slot.client.url(),
                slot.answered.load(Ordering::Relaxed)
            ));
        }
        self.read_folder()
    }

    /// Adds the instances whose URL file names a URL the pool does not have: a late start,
    /// or a restart by the engine (whose earlier URL is then dropped).
    fn read_folder(&self) -> Result<()> {
        let Some((folder, patience)) = &self.folder else {
            return Ok(());
        };
        for (i, url) in folder.scan().into_iter().enumerate() {
            let Some(url) = url else { continue };
            let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
            let same = |s: &&Arc<Slot>| s.index == Some(i);
            if slots.iter().filter(same).any(|s| s.client.url() == url) {
                continue;
            }
            for old in slots.iter().filter(same) {
                old.gone.store(true, Ordering::Relaxed);
            }
            slots.push(Slot::new(Some(i), Client::new(&url, *patience)?));
            drop(slots);
            self.note(format!(
                "{} is back at {url} (restarted by the engine)",
                folder.name(i)
            ));
        }
        Ok(())
    }

    fn note(&self, line: String) {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    /// What happened to instances during the run, one sentence each, in order.
    pub fn history(&self) -> Vec<String> {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Each instance's URL (every one that took part, live or not) and how many of its leases
    /// were answered, in the order they joined.
    pub fn answered(&self) -> Vec<(String, u64)> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .map(|s| {
                (
                    s.client.url().to_string(),
                    s.answered.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

impl Lease {
    /// The leased instance.
    pub fn client(&self) -> &Client {
        &self.slot.client
    }

    /// Counts this lease's call as answered by its instance.
    pub fn answered(&self) {
        self.slot.answered.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.slot.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.in_flight.now.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::umbridge::discovery::MANIFEST;

    fn url(port: u16) -> String {
        format!("http://127.0.0.1:{port}")
    }

    #[test]
    fn a_pool_leases_the_least_busy_instance_and_rotates_ties() {
        let pool = Pool::new(
            (1..=3)
                .map(|p| Client::new(&url(p), Patience::default()).unwrap())
                .collect(),
        );
        let index = |l: &Lease| l.client().url().to_string();
        // Idle: ties, taken in turn.
        let turns: Vec<String> = (0..4).map(|_| index(&pool.lease().unwrap())).collect();
        assert_eq!(turns, [url(1), url(2), url(3), url(1)]);
        // Held leases push the next ones elsewhere: 6 in flight on 3 instances, 2 each.
        let held: Vec<Lease> = (0..6).map(|_| pool.lease().unwrap()).collect();
        for p in 1..=3 {
            assert_eq!(held.iter().filter(|l| index(l) == url(p)).count(), 2);
        }
        held[4].answered();
        let busy = index(&held[4]);
        drop(held);
        assert_eq!((pool.peak_in_flight(), pool.capacity()), (6, 3));
        let answered = pool.answered();
        assert_eq!(answered.iter().map(|(_, n)| n).sum::<u64>(), 1);
        assert!(answered.iter().any(|(u, n)| *u == busy && *n == 1));
        // A single instance takes every call.
        let one = Pool::new(vec![Client::new(&url(1), Patience::default()).unwrap()]);
        let _a = one.lease().unwrap();
        assert_eq!(index(&one.lease().unwrap()), url(1));
    }

    #[test]
    fn a_folders_pool_drops_a_dead_instance_and_takes_its_restart() {
        let dir = std::env::temp_dir().join(format!("shmc-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(MANIFEST),
            r#"{"instances": ["task 0", "task 1"], "ready_seconds": 0.3}"#,
        )
        .unwrap();
        let folder = Folder::open(&dir, u64::MAX).unwrap();
        for (i, port) in [(0, 1), (1, 2)] {
            std::fs::write(folder.url_file(i), url(port)).unwrap();
        }
        let p = Patience::default();
        let clients = vec![
            Client::new(&url(1), p).unwrap(),
            Client::new(&url(2), p).unwrap(),
        ];
        let pool = Pool::from_folder(folder.clone(), p, clients);
        let lease = pool.lease().unwrap();
        let dead = lease.client().url().to_string();
        pool.drop_instance(&lease, &Error::invalid("gone")).unwrap();
        drop(lease);
        // Only the other instance is leased now.
        assert!((0..4).all(|_| pool.lease().unwrap().client().url() != dead));
        // Its task restarted elsewhere: the new URL joins, the old one stays out.
        let i = if dead == url(1) { 0 } else { 1 };
        std::fs::write(folder.url_file(i), url(9)).unwrap();
        let other = pool.lease().unwrap();
        pool.drop_instance(&other, &Error::invalid("gone too"))
            .unwrap();
        drop(other);
        assert_eq!(pool.lease().unwrap().client().url(), url(9));
        let history = pool.history();
        assert_eq!(history.len(), 3, "{history:?}");
        assert!(
            history[0].starts_with(&format!("model instance {i} (task {i}) at {dead} stopped"))
        );
        assert_eq!(
            history[2],
            format!(
                "model instance {i} (task {i}) is back at {} (restarted by the engine)",
                url(9)
            )
        );
        // With none left and no restart, the lease fails after the ready time.
        let last = pool.lease().unwrap();
        pool.drop_instance(&last, &Error::invalid("gone")).unwrap();
        drop(last);
        let err = pool.lease().unwrap_err().to_string();
        assert!(err.contains("none was restarted within 0.3 s"), "{err}");
    }
}
