//! A run split into shards (`shmc sample --chain-id`), read as one run.
//!
//! "A run owns its folder": each shard is a run of its own, in a folder of its own, with its own
//! saved command line, lock, checkpoints and `--resume`. `shmc summary` and `shmc report` take
//! the shards' folders (or the folder that holds them) and read their chains as one run, once
//! they are one: started by this version with the same settings but for those that make a
//! shard (`--chains`, `--chain-id`, `--output`, and `--overwrite`, `--quiet`, which change no
//! draw), and their chains numbered 1, 2, ... without a gap or a chain in two shards.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use clap::Parser;

use shmc::output::RUN_SETTINGS_FILE;
use shmc::{Error, Result};

/// The options that differ between the shards of one run.
const PER_SHARD: [&str; 5] = [
    "--chains",
    "--chain-id",
    "--output",
    "--overwrite",
    "--quiet",
];

/// One shard: its folder, its chains' ids, and its settings (the options of its command line
/// but those of [`PER_SHARD`], each with its values, sorted).
struct Shard {
    dir: PathBuf,
    ids: RangeInclusive<usize>,
    settings: Vec<String>,
}

/// The run folders `dirs` name, in chain order: a folder holding a run's settings file is a
/// run (or a shard) of its own; one that holds none is the folder of a run's shards if any of
/// its subfolders holds one (each such subfolder a shard), else a folder of CmdStan CSVs read
/// as they are. Two shards or more must be one run (see the module's documentation): the
/// first problem is the error, in one line.
pub fn folders(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut runs = Vec::new();
    let mut plain = Vec::new();
    for dir in dirs {
        if dir.join(RUN_SETTINGS_FILE).is_file() {
            runs.push(dir.clone());
            continue;
        }
        let shards = shard_folders(dir)?;
        match shards.is_empty() {
            true => plain.push(dir.clone()),
            false => runs.extend(shards),
        }
    }
    let mut shards = runs
        .iter()
        .map(|dir| read_shard(dir))
        .collect::<Result<Vec<_>>>()?;
    shards.sort_by_key(|s| *s.ids.start());
    if shards.len() > 1 {
        check_one_run(&shards)?;
    }
    Ok(shards.into_iter().map(|s| s.dir).chain(plain).collect())
}

/// The subfolders of `dir` that hold a run's settings file, in name order. When there are any,
/// a subfolder holding chain files but no settings file is refused: it looks like a shard whose
/// settings file went missing, and leaving its chains out would report a part of the run.
fn shard_folders(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let subfolders: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    let (mut found, others): (Vec<PathBuf>, Vec<PathBuf>) = subfolders
        .into_iter()
        .partition(|p| p.join(RUN_SETTINGS_FILE).is_file());
    if !found.is_empty()
        && let Some(stray) = others.iter().find(|p| holds_chain_files(p))
    {
        return Err(Error::invalid(format!(
            "{}: holds chain files but no {RUN_SETTINGS_FILE}, beside shards that have one: \
             a shard of this run that lost its settings file, or another run's folder; restore \
             it or move the folder out of {}",
            stray.display(),
            dir.display()
        )));
    }
    found.sort();
    Ok(found)
}

/// Whether `dir` holds a chain's file, as `shmc summary` finds them in a folder.
fn holds_chain_files(dir: &Path) -> bool {
    shmc::report::csv_files(dir).is_ok_and(|files| !files.is_empty())
}

/// The shard whose folder is `dir`, from its saved command line.
fn read_shard(dir: &Path) -> Result<Shard> {
    let path = dir.join(RUN_SETTINGS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let (_, args) = crate::resume::read_invocation(&text, &path)?;
    let not_a_run = || {
        Error::invalid(format!(
            "{}: not the command line of a run of `shmc sample`",
            path.display()
        ))
    };
    let cli = crate::Cli::try_parse_from(std::iter::once("shmc".to_string()).chain(args.clone()))
        .map_err(|_| not_a_run())?;
    let crate::Command::Sample(sample) = cli.command else {
        return Err(not_a_run());
    };
    Ok(Shard {
        dir: dir.to_path_buf(),
        ids: sample.chain_ids(),
        settings: settings(&args[1..]),
    })
}

/// The options of a command line `args` (after the subcommand) that make the draws, each
/// with its values (`--seed 3`; `--seed=3` as `--seed 3`), sorted: those of [`PER_SHARD`]
/// left out.
fn settings(args: &[String]) -> Vec<String> {
    options_but(args, &PER_SHARD)
}

/// The options of a command line `args` (after the subcommand), each with its values
/// (`--seed=3` as `--seed 3`), sorted, but those named in `leave_out`.
pub(crate) fn options_but(args: &[String], leave_out: &[&str]) -> Vec<String> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    for arg in args {
        match arg.strip_prefix("--") {
            Some(_) => groups.push(arg.splitn(2, '=').map(str::to_string).collect()),
            None => match groups.last_mut() {
                Some(group) => group.push(arg.clone()),
                None => groups.push(vec![arg.clone()]),
            },
        }
    }
    let mut kept: Vec<String> = groups
        .into_iter()
        .filter(|g| !leave_out.contains(&g[0].as_str()))
        .map(|g| g.join(" "))
        .collect();
    kept.sort();
    kept
}

/// The settings of `a` that `b` lacks, as one line ("(none)" when there are none): what two
/// runs that should have one command line differ by.
pub(crate) fn only_in(a: &[String], b: &[String]) -> String {
    let own: Vec<&str> = a
        .iter()
        .filter(|s| !b.contains(s))
        .map(String::as_str)
        .collect();
    if own.is_empty() {
        "(none)".to_string()
    } else {
        own.join(" ")
    }
}

/// Refuses `shards` (sorted by first chain) that are not one run: settings that differ from
/// the first's, or chains that do not follow on from 1 (a gap, or a chain in two shards).
fn check_one_run(shards: &[Shard]) -> Result<()> {
    let first = &shards[0];
    for shard in &shards[1..] {
        if shard.settings != first.settings {
            return Err(Error::invalid(format!(
                "{} and {} are not shards of one run: their settings differ ({} vs {})",
                shard.dir.display(),
                first.dir.display(),
                only_in(&shard.settings, &first.settings),
                only_in(&first.settings, &shard.settings)
            )));
        }
    }
    let mut next = 1;
    let mut previous: Option<&Shard> = None;
    for shard in shards {
        let (start, end) = (*shard.ids.start(), *shard.ids.end());
        let after = previous.map_or_else(String::new, |p| {
            format!(
                " after {} (chains {}..{})",
                p.dir.display(),
                p.ids.start(),
                p.ids.end()
            )
        });
        if start > next {
            return Err(Error::invalid(format!(
                "{} holds chains {start}..{end}{after}: chains {next}..{} are in no shard given",
                shard.dir.display(),
                start - 1
            )));
        }
        if start < next {
            return Err(Error::invalid(format!(
                "{} holds chains {start}..{end}{after}: chain {start} is in two shards",
                shard.dir.display()
            )));
        }
        next = end + 1;
        previous = Some(shard);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options that make a shard are left out, values stay with their option, and the
    /// order of the options does not matter.
    #[test]
    fn settings_leave_out_what_makes_a_shard() {
        let args = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let a = settings(&args(
            "--model banana --chains 2 --chain-id=3 --seed 7 --output s2 --quiet",
        ));
        let b = settings(&args("--seed=7 --overwrite --output s1 --model banana"));
        assert_eq!(a, vec!["--model banana", "--seed 7"]);
        assert_eq!(a, b);
        assert_ne!(a, settings(&args("--model banana --seed 8")));
    }
}
