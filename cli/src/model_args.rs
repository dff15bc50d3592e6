//! `--model` and the model's options: one flag per setting the built-in models declare
//! ([`models::options`]), made from the model table, so a model's new option needs no change
//! here. Each flag's help lists the models that take it; `shmc models` lists them per model.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use shmc::models::{self, CATALOGUE, ModelSpec};

/// Which model, and the settings given for it.
#[derive(Clone, Debug)]
pub struct ModelArgs {
    /// The built-in model's name.
    pub model: String,
    /// Each model option given on the command line: its setting and value (a switch's `true`).
    given: Vec<(&'static str, String)>,
}

impl ModelArgs {
    /// The model these options describe, its data and mesh within `memory_limit` bytes.
    pub fn spec(&self, memory_limit: u64) -> ModelSpec {
        let mut spec = ModelSpec::named(&self.model);
        for (setting, value) in &self.given {
            spec.set(setting, value);
        }
        spec.memory_limit = memory_limit;
        spec
    }

    /// `--data` as given: what a saved surrogate and a run's files record it was fitted on.
    pub fn data(&self) -> Option<&str> {
        self.given
            .iter()
            .find(|(setting, _)| *setting == "data")
            .map(|(_, value)| value.as_str())
    }
}

/// The help of `setting`'s flag: each note with the models that declare it so.
fn help(setting: &str) -> String {
    let mut notes: Vec<(&str, Vec<&str>)> = Vec::new();
    for model in &CATALOGUE {
        for option in model.options.iter().filter(|o| o.setting == setting) {
            match notes.iter_mut().find(|(note, _)| *note == option.note) {
                Some((_, names)) => names.push(model.name),
                None => notes.push((option.note, vec![model.name])),
            }
        }
    }
    let parts: Vec<String> = notes
        .iter()
        .map(|(note, names)| format!("{}: {note}", names.join(", ")))
        .collect();
    parts.join("; ")
}

/// The flag of one model option.
fn arg(option: &models::ModelOption) -> Arg {
    let arg = Arg::new(option.setting)
        .long(option.setting.replace('_', "-"))
        .help(help(option.setting));
    let arg = match option.value {
        Some(value) => arg
            .value_name(value)
            .action(ArgAction::Set)
            .allow_negative_numbers(true),
        None => arg.action(ArgAction::SetTrue),
    };
    // `--seed-data` was this flag's name once; scripts still use it.
    match option.setting {
        "data_seed" => arg.alias("seed-data"),
        _ => arg,
    }
}

impl Args for ModelArgs {
    fn augment_args(cmd: Command) -> Command {
        let model = Arg::new("model")
            .long("model")
            .required(true)
            .value_name("NAME")
            .help("Built-in model (see `shmc models`)");
        cmd.next_help_heading("Model and data (each model's options: shmc models)")
            .arg(model)
            .args(models::options().map(arg))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ModelArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = models::options()
            .filter_map(|option| {
                let value = match option.value {
                    None => matches.get_flag(option.setting).then(|| "true".to_string()),
                    Some(_) => matches.get_one::<String>(option.setting).cloned(),
                };
                value.map(|value| (option.setting, value))
            })
            .collect();
        Ok(Self {
            model: matches
                .get_one::<String>("model")
                .cloned()
                .unwrap_or_default(),
            given,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}
