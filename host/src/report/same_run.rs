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
//! The same file given twice (by one path or two, or through a hard link) is not a second chain,
//! nor is a copy of one (the same draws, row for row), nor a file shmc named for one chain
//! whose header says it is another.

use crate::data::same_source;
use crate::output::StanCsv;

/// The files of `csvs` that are one run with the first, in order, and one line for each other
/// file naming it, the file it was compared with, and what differs.
pub fn one_run(csvs: Vec<StanCsv>) -> (Vec<StanCsv>, Vec<String>) {
    let mut kept: Vec<StanCsv> = Vec::new();
    let mut refused = Vec::new();
    for csv in csvs {
        let problem = match (again(&kept, &csv), kept.first()) {
            (Some(problem), _) => Some(problem),
            (None, Some(first)) => differences(first, &csv).map(|what| {
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
            None => kept.push(csv),
        }
    }
    (kept, refused)
}

/// Why `csv` is not a chain of its own beside `kept`, if it is not: the same file as one of
/// them (by another path, or a hard link to it), a copy of one (the same draws, row for row),
/// or a file named for another chain than its header's ([`renamed`]).
fn again(kept: &[StanCsv], csv: &StanCsv) -> Option<String> {
    let same_file = |earlier: &StanCsv| same_file::is_same_file(&earlier.path, &csv.path);
    if let Some(earlier) = kept.iter().find(|k| same_file(k).unwrap_or(false)) {
        return Some(format!(
            "{} is {} again (the same file given twice, or a link to it): one chain is not two",
            csv.path.display(),
            earlier.path.display()
        ));
    }
    let copy = |earlier: &StanCsv| {
        earlier.columns.first().is_some_and(|c| !c.is_empty()) && earlier.columns == csv.columns
    };
    if let Some(earlier) = kept.iter().find(|k| copy(k)) {
        return Some(format!(
            "{} holds the same draws as {}, row for row (a copy of that chain): one chain is not \
             two",
            csv.path.display(),
            earlier.path.display()
        ));
    }
    renamed(csv)
}

/// Whether `csv` is named as shmc names a chain's file (`MODEL-K.csv`, its header's model)
/// for another chain than its header's `id`: a file renamed, or copied over another chain's.
fn renamed(csv: &StanCsv) -> Option<String> {
    let (model, id) = (csv.setting("model")?, csv.setting("id")?);
    let stem = csv.path.file_stem()?.to_str()?;
    let named = stem.strip_prefix(model)?.strip_prefix('-')?;
    (named.parse::<usize>().is_ok() && named != id).then(|| {
        format!(
            "{} is named for chain {named}, but its header says chain {id} (renamed, or copied \
             over another chain's file): one chain is not another",
            csv.path.display()
        )
    })
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
    if let Some(data) = other_data(first, other) {
        found.push(data);
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

/// How `other`'s data differs from `first`'s, if it does. Files whose headers record their
/// data's digest are judged by it: the same bytes under any path are one data set, and the same
/// path holding other bytes (another working directory, an edited file) is not. Files that
/// record none (earlier versions, CmdStan's) are judged by the path.
fn other_data(first: &StanCsv, other: &StanCsv) -> Option<String> {
    let (data, first_data) = (other.data_file.as_deref(), first.data_file.as_deref());
    let quoted =
        |value: Option<&str>| value.map_or_else(|| "none".to_string(), |v| format!("{v:?}"));
    if let (Some(a), Some(b)) = (&other.data_sha256, &first.data_sha256) {
        let short = |digest: &str| digest.chars().take(12).collect::<String>();
        return (a != b).then(|| {
            format!(
                "data file {} vs {}: other bytes (sha256 {}… vs {}…)",
                quoted(data),
                quoted(first_data),
                short(a),
                short(b)
            )
        });
    }
    let same_data = match (data, first_data) {
        (Some(a), Some(b)) => same_source(a, b),
        (a, b) => a == b,
    };
    (!same_data).then(|| format!("data file {} vs {}", quoted(data), quoted(first_data)))
}

/// How `other`'s columns differ from `first`'s: the first column that differs, or the count.
fn other_columns(first: &StanCsv, other: &StanCsv) -> Option<String> {
    let (a, b) = (&other.names, &first.names);
    if let Some(k) = (0..a.len().min(b.len())).find(|&k| a[k] != b[k]) {
        return Some(format!("column {} is {:?} vs {:?}", k + 1, a[k], b[k]));
    }
    (a.len() != b.len()).then(|| format!("{} columns vs {}", a.len(), b.len()))
}
