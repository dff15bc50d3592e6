//! The model registry is the one table every front end reads: each model in
//! `shmc::models::CATALOGUE` builds at its small size, samples, is listed by `shmc models` with
//! its options as flags, and is in `shmc bench sbc`'s list exactly when it has a small instance
//! to calibrate on. Adding a model to the table alone puts it in all of them. The method
//! registry, `shmc::sampler::METHODS`, likewise feeds `--method` and the README.

use std::process::Command;

use shmc::Sampler;
use shmc::models::{CATALOGUE, build, small};
use shmc::sampler::METHODS;
use shmc_cli::experiments::sbc;

fn shmc_models() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .arg("models")
        .output()
        .expect("the shmc binary runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_model_in_the_table_builds_samples_and_is_listed_everywhere() {
    let listed = shmc_models();
    let calibrated = sbc::models();
    for entry in &CATALOGUE {
        let name = entry.name;
        let block = listed
            .split("\n\n")
            .flat_map(|b| b.split_inclusive('\n'))
            .skip_while(|line| line.trim_end() != name)
            .take_while(|line| line.trim_end() == name || line.starts_with(' '))
            .collect::<String>();
        assert!(block.contains(entry.description), "{name}: {listed}");
        for option in entry.options {
            let flag = format!("--{}", option.setting.replace('_', "-"));
            assert!(block.contains(&flag), "{name}: {flag} not in {block}");
        }
        assert_eq!(
            calibrated.contains(&name),
            entry.small.is_some(),
            "{name} in bench sbc's list"
        );
        let Some((spec, _)) = small(name).unwrap() else {
            continue;
        };
        let model = build(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        let fit = Sampler::new(model.as_ref())
            .chains(1)
            .warmup(30)
            .draws(20)
            .run()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(fit.names(), model.parameter_names(), "{name}");
        assert_eq!(fit.run().chains[0].kept(), 20, "{name}");
    }
}

/// A setting a model does not list is refused by its builder, naming the setting and model.
#[test]
fn a_setting_outside_a_models_options_is_refused() {
    for entry in CATALOGUE.iter().filter(|e| e.small.is_some()) {
        let Some((mut spec, _)) = small(entry.name).unwrap() else {
            continue;
        };
        let unlisted = ["mesh", "standardize"]
            .into_iter()
            .find(|s| !entry.options.iter().any(|o| o.setting == *s))
            .expect("no model takes both a mesh and standardized data");
        match unlisted {
            "mesh" => spec.set("mesh", 4),
            _ => spec.set("standardize", true),
        }
        let error = build(&spec)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains(unlisted) && error.contains(entry.name),
            "{}: {error}",
            entry.name
        );
    }
}

/// The model table is the one list of model options: each setting a model declares is a
/// flag of `shmc sample`, `shmc train`, `shmc sbc` and `shmc serve`, its help naming the model
/// (`shmc models` lists it under the model: the test above).
#[test]
fn every_model_option_is_a_flag_of_every_command_that_builds_a_model() {
    let text = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
            .args(args)
            .output()
            .expect("the shmc binary runs");
        String::from_utf8(out.stdout).unwrap()
    };
    for command in ["sample", "train", "sbc", "serve"] {
        let help = text(&[command, "--help"]);
        for entry in &CATALOGUE {
            for option in entry.options {
                let flag = format!("--{}", option.setting.replace('_', "-"));
                assert!(help.contains(&flag), "{command}: {flag} missing");
                // The help is on the flag's line (short help) or the next (long help).
                let lines: Vec<&str> = help.lines().collect();
                let at = lines.iter().position(|l| {
                    let l = l.trim_start();
                    l == flag || l.starts_with(&format!("{flag} "))
                });
                let line = at.map_or(String::new(), |i| {
                    lines[i..(i + 2).min(lines.len())].join(" ")
                });
                assert!(line.contains(entry.name), "{command}: {flag}: {line}");
            }
        }
    }
}

/// The method registry is the one list of methods: every entry is a `--method` value with its
/// line in `shmc sample --help`, a row of the README's table, and its default settings sample
/// with a short warmup on a model it applies to (sgld needs one whose `U` is a sum over rows,
/// mlda one with coarser levels).
#[test]
fn every_method_in_the_registry_is_offered_documented_and_runs() {
    let out = Command::new(env!("CARGO_BIN_EXE_shmc"))
        .args(["sample", "--help"])
        .output()
        .expect("the shmc binary runs");
    let help = String::from_utf8(out.stdout).unwrap();
    let readme = include_str!("../../README.md");
    for entry in &METHODS {
        let name = entry.name;
        assert!(
            help.contains(&format!("- {name}:")),
            "{name} not a --method value"
        );
        assert!(help.contains(entry.summary), "{name}'s line not in --help");
        assert!(
            readme.contains(&format!("| `{name}`")),
            "{name} not in README's table"
        );
        let model = match name {
            "sgld" => "logistic",
            "mlda" => "elliptic-pde",
            _ => "banana",
        };
        let (mut spec, _) = small(model).unwrap().unwrap();
        if name == "mlda" {
            // Finer than mlda's default levels (10x10 and 15x15), which it needs.
            spec.set("mesh", 20);
        }
        let model = build(&spec).unwrap();
        let fit = Sampler::new(model.as_ref())
            .method(entry.defaults())
            .chains(1)
            .warmup(300)
            .draws(20)
            .run()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(fit.run().chains[0].kept(), 20, "{name}");
    }
}
