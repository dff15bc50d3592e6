//! Model instances that a cluster engine starts (HyperQueue tasks), found in a shared folder
//! rather than listed by hand: each instance, once listening, writes its URL to a file of its
//! own there, the convention of UM-Bridge's HyperQueue load balancer, and whoever submitted
//! the instances wrote the folder's manifest first, saying how many to expect, what each is
//! called by the engine and how long to wait for them.
//!
//! The folder is what the engine and the sampler share, so neither talks to the other: the
//! engine may start an instance late (queued behind others), restart it elsewhere after its
//! worker died (a new URL in the same file), or never start it; the sampler's [`Pool`] reads
//! the folder again whenever it needs an instance it does not have.
//!
//! [`Pool`]: super::pool::Pool

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::{Error, Result};

/// How a `url` setting names a folder of instances: `dir:PATH`.
pub const PREFIX: &str = "dir:";
/// The manifest's file name in the folder.
pub const MANIFEST: &str = "instances.json";
/// How often the folder is read while waiting for an instance.
pub const POLL: Duration = Duration::from_millis(100);

/// The manifest, as the submitter writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// Each instance's name in the engine (for example `HyperQueue job 3, task 1`), in the order
    /// of their URL files `url-0.txt`, `url-1.txt`, ...
    instances: Vec<String>,
    /// The longest wait for an instance to write its URL, at the start and after one died.
    ready_seconds: f64,
}

/// A folder of model instances' URL files.
#[derive(Debug, Clone)]
pub struct Folder {
    dir: PathBuf,
    names: Vec<String>,
    ready: Duration,
}

impl Folder {
    /// The folder `dir`, its manifest read and checked; a manifest whose text and names would
    /// take more than `memory_limit` bytes is refused before it is read.
    pub fn open(dir: &Path, memory_limit: u64) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let size = std::fs::metadata(&path)
            .map_err(|e| Error::io(&path, e))?
            .len();
        // The text, and the names parsed from it (each at most the text's length, plus a
        // String's 24 bytes per name, which takes at least 3 bytes of text: `"",`).
        crate::memory::check(
            &format!("the instance manifest {} ({size} bytes)", path.display()),
            "url",
            u128::from(size).checked_mul(10),
            memory_limit,
        )?;
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| Error::Data {
            path: path.clone(),
            line: e.line(),
            message: format!(
                "expected {{\"instances\": [NAME, ...], \"ready_seconds\": SECONDS}}: {e}"
            ),
        })?;
        let seconds = manifest.ready_seconds;
        if manifest.instances.is_empty() || !(seconds.is_finite() && seconds > 0.0) {
            return Err(Error::Data {
                path,
                line: 1,
                message: "needs at least one instance and a positive ready_seconds".into(),
            });
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            names: manifest.instances,
            ready: Duration::from_secs_f64(seconds.min(1e9)),
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many instances the manifest expects.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the manifest expects none (never: [`Folder::open`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The longest wait for an instance.
    pub fn ready(&self) -> Duration {
        self.ready
    }

    /// Instance `i` as the user knows it: its number and its name in the engine.
    pub fn name(&self, i: usize) -> String {
        format!("model instance {i} ({})", self.names[i])
    }

    /// Where instance `i` writes its URL.
    pub fn url_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("url-{i}.txt"))
    }

    /// The URL each instance has written so far, if any. The file's first line is the URL;
    /// an instance writes it whole (a rename), so a file being written is never read half.
    pub fn scan(&self) -> Vec<Option<String>> {
        (0..self.len())
            .map(|i| {
                let text = std::fs::read_to_string(self.url_file(i)).ok()?;
                let url = text.lines().next()?.trim();
                (!url.is_empty()).then(|| url.to_string())
            })
            .collect()
    }

    /// Every instance's URL, once all have written theirs; fails naming the first that has
    /// not within the ready time.
    pub fn wait_for_all(&self) -> Result<Vec<String>> {
        let start = Instant::now();
        loop {
            let found = self.scan();
            if let Some(urls) = found.iter().cloned().collect::<Option<Vec<_>>>() {
                return Ok(urls);
            }
            if start.elapsed() >= self.ready {
                let missing = found.iter().position(Option::is_none).unwrap_or(0);
                return Err(self.never_ready(missing));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The error of instance `i` that never wrote its URL within the ready time.
    pub fn never_ready(&self, i: usize) -> Error {
        Error::invalid(format!(
            "{} wrote no URL to {} within {} s: it never became ready (still queued by the \
             engine, or its server did not start: see the task's stderr)",
            self.name(i),
            self.url_file(i).display(),
            self.ready.as_secs_f64()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str, manifest: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shmc-discovery-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MANIFEST), manifest).unwrap();
        dir
    }

    #[test]
    fn a_folder_waits_for_every_instance_and_names_the_one_missing() {
        let dir = folder(
            "wait",
            r#"{"instances": ["job 1 task 0", "job 1 task 1"], "ready_seconds": 0.3}"#,
        );
        let f = Folder::open(&dir, u64::MAX).unwrap();
        std::fs::write(f.url_file(0), "http://127.0.0.1:1\n").unwrap();
        let err = f.wait_for_all().unwrap_err().to_string();
        assert!(
            err.starts_with("model instance 1 (job 1 task 1) wrote no URL to ")
                && err.contains("url-1.txt within 0.3 s"),
            "{err}"
        );
        std::fs::write(f.url_file(1), "http://127.0.0.1:2").unwrap();
        assert_eq!(
            f.wait_for_all().unwrap(),
            ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        );
    }

    #[test]
    fn a_bad_manifest_is_one_line_naming_the_file() {
        for text in [
            r#"{"instances": [], "ready_seconds": 1}"#,
            r#"{"instances": ["a"], "ready_seconds": -1}"#,
            r#"{"instances": ["a"]}"#,
        ] {
            let dir = folder("bad", text);
            let err = Folder::open(&dir, u64::MAX).unwrap_err().to_string();
            assert!(err.contains("instances.json:1:"), "{text}: {err}");
        }
        let none = Folder::open(&std::env::temp_dir().join("shmc-no-such-folder"), u64::MAX);
        let err = none.unwrap_err().to_string();
        assert!(
            err.contains("shmc-no-such-folder/instances.json: "),
            "{err}"
        );
    }

    #[test]
    fn a_manifest_too_large_for_the_memory_limit_is_refused_before_it_is_read() {
        let names: Vec<String> = (0..1000).map(|i| format!("\"task {i}\"")).collect();
        let text = format!(
            r#"{{"instances": [{}], "ready_seconds": 1}}"#,
            names.join(",")
        );
        let dir = folder("large", &text);
        assert_eq!(Folder::open(&dir, u64::MAX).unwrap().len(), 1000);
        let err = Folder::open(&dir, 10 * text.len() as u64 - 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the instance manifest") && err.contains("instances.json"),
            "{err}"
        );
        assert!(Folder::open(&dir, 10 * text.len() as u64).is_ok());
    }
}
