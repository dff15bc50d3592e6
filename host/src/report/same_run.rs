//! Whether chains' files are one run's, so that a summary may combine them.
//!
//! One run, for combining chains, is one target distribution sampled, as far as a file's header
//! tells it: the same `model`, the same data file (`file` under `data`; none for a model that
//! reads none), the same columns (the parameters' names, in order, after the sampler's), and
//! the same `inference` (exact, or which approximation the draws target). Everything else may
//! differ between chains that belong together: the seed and the chain's `id` (a CmdStan user
//! runs chains one at a time, each with its own seed and id, and combines them), the output
//! file, the draws and warmup asked for (the chains are cut to the shortest), the step size,
//! metric and method (HMC and NUTS chains of one posterior target the same distribution; R̂ then
//! says whether they agree). A model's options that the header does not record (a simulated
//! model's size or data seed, a standardization) cannot be told apart here, nor can the model
//! of a file that names none.
//!
//! The same file given twice (by one path or two: the same canonical path) is not a second chain.

use std::path::PathBuf;

use crate::data::same_source;
use crate::output::StanCsv;

/// The files of `csvs` that are one run with the first, in order, and one line for each other
/// file naming it, the file it was compared with, and what differs.
pub fn one_run(csvs: Vec<StanCsv>) -> (Vec<StanCsv>, Vec<String>) {
    let mut kept: Vec<(Option<PathBuf>, StanCsv)> = Vec::new();
    let mut refused = Vec::new();
    for csv in csvs {
        let canonical = std::fs::canonicalize(&csv.path).ok();
        let again = kept
            .iter()
            .find(|(c, _)| canonical.is_some() && *c == canonical);
        let problem = match (again, kept.first()) {
            (Some((_, earlier)), _) => Some(format!(
                "{} is {} again (the same file given twice): one chain is not two",
                csv.path.display(),
                earlier.path.display()
            )),
            (None, Some((_, first))) => differences(first, &csv).map(|what| {
                format!(
                    "{} and {} are not one run: {what}",
                    csv.path.display(),
                    first.path.display()
                )
            }),
            (None, None) => None,
        };
        match problem {
            Some(line) => refused.push(line),
            None => kept.push((canonical, csv)),
        }
    }
    (kept.into_iter().map(|(_, csv)| csv).collect(), refused)
}

/// What makes `other` another run than `first`, each as `other`'s value vs `first`'s, or
/// `None` if they are one run.
fn differences(first: &StanCsv, other: &StanCsv) -> Option<String> {
    let quoted =
        |value: Option<&str>| value.map_or_else(|| "none".to_string(), |v| format!("{v:?}"));
    let mut found = Vec::new();
    let (model, first_model) = (other.setting("model"), first.setting("model"));
    // A file that names no model (not written by shmc or CmdStan) is judged by the rest.
    if model.is_some() && first_model.is_some() && model != first_model {
        found.push(format!(
            "model {} vs {}",
            quoted(model),
            quoted(first_model)
        ));
    }
    let (data, first_data) = (other.data_file.as_deref(), first.data_file.as_deref());
    let same_data = match (data, first_data) {
        (Some(a), Some(b)) => same_source(a, b),
        (a, b) => a == b,
    };
    if !same_data {
        found.push(format!(
            "data file {} vs {}",
            quoted(data),
            quoted(first_data)
        ));
    }
    if let Some(columns) = other_columns(first, other) {
        found.push(columns);
    }
    let (inference, first_inference) = (other.setting("inference"), first.setting("inference"));
    let kind = |label: Option<&str>| label.map_or("exact", |_| "approximate");
    match (inference, first_inference) {
        (a, b) if a == b => {}
        (Some(a), Some(_)) => found.push(format!("another approximate inference ({a})")),
        (a, b) => found.push(format!("{} inference vs {}", kind(a), kind(b))),
    }
    (!found.is_empty()).then(|| found.join("; "))
}

/// How `other`'s columns differ from `first`'s: the first column that differs, or the count.
fn other_columns(first: &StanCsv, other: &StanCsv) -> Option<String> {
    let (a, b) = (&other.names, &first.names);
    if let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) {
        return Some(format!("column {} is {:?} vs {:?}", k + 1, a[k], b[k]));
    }
    (a.len() != b.len()).then(|| format!("{} columns vs {}", a.len(), b.len()))
}
