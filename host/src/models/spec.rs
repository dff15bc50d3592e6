//! What a built-in model is built from: [`ModelSpec`], the model's name and the settings a
//! front end gave as text, and [`ModelOption`], how a model declares a setting it reads.
//!
//! A model reads its own settings ([`ModelSpec::get`], [`ModelSpec::switch`]) into its own
//! typed settings, so a new option is one line in its [`super::ModelEntry`] and one read in its
//! builder: no front end changes. The command line makes one flag per declared setting; the
//! Python package takes them as keywords.

use std::fmt::Display;
use std::str::FromStr;

use crate::{Error, Result};

/// One setting a model reads, as its [`super::ModelEntry`] declares it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelOption {
    /// Its snake-case name, as [`Error::Setting`] gives it.
    pub setting: &'static str,
    /// What its value is in one word (`N`, `FILE`, `SD`), or `None` for a switch: on when
    /// given, off otherwise.
    pub value: Option<&'static str>,
    /// Its default or its values in words.
    pub note: &'static str,
}

impl ModelOption {
    /// A setting that takes a value.
    pub const fn value(setting: &'static str, value: &'static str, note: &'static str) -> Self {
        Self {
            setting,
            value: Some(value),
            note,
        }
    }

    /// A setting that is on when given.
    pub const fn switch(setting: &'static str, note: &'static str) -> Self {
        Self {
            setting,
            value: None,
            note,
        }
    }
}

/// Which model to build, and the settings given for it, as text, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The model's name, as listed by [`super::CATALOGUE`].
    pub name: String,
    /// Each given setting's name and value; a switch's value is `true` or `false`.
    settings: Vec<(String, String)>,
    /// The most bytes the model's data (read or simulated) or its PDE mesh may take; a larger
    /// one is refused before it is allocated ([`crate::memory`]).
    pub memory_limit: u64,
}

impl ModelSpec {
    /// A spec for `name` with no setting given: every one at the model's default.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.into(),
            settings: Vec::new(),
            memory_limit: u64::MAX,
        }
    }

    /// This spec with `setting` given as `value`.
    pub fn with(mut self, setting: &str, value: impl ToString) -> Self {
        self.set(setting, value);
        self
    }

    /// Gives `setting` the value `value`, replacing an earlier one.
    pub fn set(&mut self, setting: &str, value: impl ToString) {
        let value = value.to_string();
        match self.settings.iter_mut().find(|(s, _)| s == setting) {
            Some((_, old)) => *old = value,
            None => self.settings.push((setting.into(), value)),
        }
    }

    /// The given settings' names, in the order given.
    pub fn given(&self) -> impl Iterator<Item = &str> {
        self.settings.iter().map(|(s, _)| s.as_str())
    }

    /// Whether `setting` was given.
    pub fn has(&self, setting: &str) -> bool {
        self.given().any(|s| s == setting)
    }

    /// `setting`'s value read as a `T`, `None` when it was not given, or an error naming it.
    pub fn get<T: FromStr>(&self, setting: &'static str) -> Result<Option<T>>
    where
        T::Err: Display,
    {
        let Some((_, text)) = self.settings.iter().find(|(s, _)| s == setting) else {
            return Ok(None);
        };
        text.parse()
            .map(Some)
            .map_err(|e| Error::setting(setting, format!("cannot be {text:?}: {e}")))
    }

    /// Whether the switch `setting` is on (given as `true`, or not at all as off).
    pub fn switch(&self, setting: &'static str) -> Result<bool> {
        Ok(self.get::<bool>(setting)?.unwrap_or(false))
    }

    /// Refuses the first of `settings` that was given, as `problem`: settings a model takes in
    /// one form and not in another (a regression's data options when it simulates its data).
    pub(crate) fn refuse_any(&self, settings: &[&'static str], problem: &str) -> Result<()> {
        match settings.iter().find(|s| self.has(s)) {
            Some(setting) => Err(Error::setting(setting, problem)),
            None => Ok(()),
        }
    }
}
