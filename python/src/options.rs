//! The keyword options of `shmc.sample` and `shmc.model`, read by name and type: each one read
//! is removed, so what is left at the end was not understood and is refused by name (a typo
//! silently ignored would make a user believe it shaped the run).

use std::collections::BTreeMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The options given, by name, not yet read.
pub struct Options<'py> {
    given: BTreeMap<String, Bound<'py, PyAny>>,
    /// What the options are for, in messages ("method nuts", "model banana").
    context: String,
}

impl<'py> Options<'py> {
    /// The options of `dict` (`None`: none), for `context`.
    pub fn new(dict: Option<&Bound<'py, PyDict>>, context: impl Into<String>) -> PyResult<Self> {
        let mut given = BTreeMap::new();
        if let Some(dict) = dict {
            for (key, value) in dict.iter() {
                // None means "not given", as Python's keyword defaults do.
                if !value.is_none() {
                    given.insert(key.extract::<String>()?, value);
                }
            }
        }
        Ok(Self {
            given,
            context: context.into(),
        })
    }

    /// Option `name` as `T`, if given; a value of another type is a TypeError naming it.
    pub fn take<T: for<'a> FromPyObject<'a, 'py>>(&mut self, name: &str) -> PyResult<Option<T>> {
        let Some(value) = self.given.remove(name) else {
            return Ok(None);
        };
        value.extract::<T>().map(Some).map_err(|_| {
            PyTypeError::new_err(format!(
                "option {name}={} for {}: expected {}",
                value.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
                self.context,
                expected::<T>()
            ))
        })
    }

    /// Option `name` as `T` if it is one; left for another reading if it is not.
    pub fn take_if<T: for<'a> FromPyObject<'a, 'py>>(&mut self, name: &str) -> PyResult<Option<T>> {
        let Some(value) = self.given.get(name) else {
            return Ok(None);
        };
        let Ok(value) = value.extract::<T>() else {
            return Ok(None);
        };
        self.given.remove(name);
        Ok(Some(value))
    }

    /// Option `name` as a string, one of `choices` (the first is the default).
    pub fn choice(&mut self, name: &str, choices: &[&'static str]) -> PyResult<&'static str> {
        let Some(given) = self.take::<String>(name)? else {
            return Ok(choices[0]);
        };
        choices
            .iter()
            .find(|c| **c == given)
            .copied()
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "option {name}={given:?} for {}: must be one of {}",
                    self.context,
                    choices.join(", ")
                ))
            })
    }

    /// Option `name` as a bool (default false).
    pub fn flag(&mut self, name: &str) -> PyResult<bool> {
        Ok(self.take::<bool>(name)?.unwrap_or(false))
    }

    /// Option `name` as text, from a number or a string (options such as
    /// `surrogate_steps_factor=3` or `"auto"`).
    pub fn text(&mut self, name: &str) -> PyResult<Option<String>> {
        let Some(value) = self.given.get(name) else {
            return Ok(None);
        };
        let text = match value.extract::<String>() {
            Ok(text) => text,
            Err(_) => value.str()?.to_string(),
        };
        self.given.remove(name);
        Ok(Some(text))
    }

    /// Refuses the options not read, naming them and what `valid` names.
    pub fn finish(self, valid: &str) -> PyResult<()> {
        if self.given.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&str> = self.given.keys().map(String::as_str).collect();
        Err(PyTypeError::new_err(format!(
            "unknown option{} {} for {}; {valid}",
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join(", "),
            self.context
        )))
    }
}

/// What a value of type `T` is, in a message's words.
fn expected<T>() -> &'static str {
    match std::any::type_name::<T>() {
        "usize" | "u64" | "u32" | "u8" => "a whole number of at least 0",
        "f64" => "a number",
        "bool" => "True or False",
        "alloc::string::String" => "a string",
        "alloc::vec::Vec<f64>" => "a list of numbers",
        "std::path::PathBuf" => "a path",
        other => other,
    }
}
