//! What a saved surrogate was trained on, checked against the run that loads it: a surrogate of
//! another model or data set proposes from another posterior (the exact MH step keeps the draws
//! right, but they come slowly), and the held-out error its file reports is that posterior's.
//!
//! A file records the model's name and the data file as the run named them ([`SurrogateMeta`]'s
//! `model` and `data`). A file written before the data were recorded still loads, with a
//! warning that they could not be checked.

use std::path::Path;

use serde::{Deserialize, Deserializer};

use super::SurrogateMeta;
use super::file::SurrogateFile;
use crate::data::same_source;
use crate::{Error, Result};

/// Reads a present `data` field, `null` included, as recorded (`Some`); an absent one is
/// `None` through `#[serde(default)]`.
pub(super) fn recorded<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Checks that the surrogate file `path` was trained on the model called `model` with the data
/// file `data` (`None`: the model reads none). An error naming both models, or both data sets,
/// if not; `Ok(Some(warning))` if the file does not record what it was trained on.
pub fn check(path: &Path, model: &str, data: Option<&str>) -> Result<Option<String>> {
    let meta = SurrogateFile::open(path)?.meta()?;
    check_meta(&meta, path, model, data)
}

/// [`check`] on a file's meta already read.
pub fn check_meta(
    meta: &SurrogateMeta,
    path: &Path,
    model: &str,
    data: Option<&str>,
) -> Result<Option<String>> {
    let file = path.display();
    let name = |d: Option<&str>| {
        d.map_or_else(
            || "the model's own data (no data file)".into(),
            |d| format!("data {d:?}"),
        )
    };
    if meta.model.is_empty() {
        return Ok(Some(format!(
            "{file} does not record the model its surrogate was trained on: it is loaded \
             unchecked; make sure it was trained on model {model:?} with {}",
            name(data)
        )));
    }
    if meta.model != model {
        return Err(Error::invalid(format!(
            "{file}: the surrogate was trained on model {:?}, not on this run's model {model:?}",
            meta.model
        )));
    }
    let Some(trained) = &meta.data else {
        let expected = data.map_or_else(|| "without a data file".into(), |d| format!("on {d:?}"));
        return Ok(Some(format!(
            "{file} does not record the data its surrogate was trained on (written by an older \
             shmc): it is loaded unchecked; make sure it was trained {expected}"
        )));
    };
    let same = match (trained.as_deref(), data) {
        (Some(a), Some(b)) => same_source(a, b),
        (a, b) => a == b,
    };
    if !same {
        return Err(Error::invalid(format!(
            "{file}: the surrogate was trained on {}, this run is on {}",
            name(trained.as_deref()),
            name(data)
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(model: &str, data: Option<Option<&str>>) -> SurrogateMeta {
        SurrogateMeta {
            model: model.into(),
            data: data.map(|d| d.map(str::to_string)),
            ..SurrogateMeta::default()
        }
    }

    #[test]
    fn another_model_or_data_set_is_refused_naming_both() {
        let path = Path::new("net.json");
        let check = |m: &SurrogateMeta, model, data| check_meta(m, path, model, data);
        let banana = meta("banana", Some(None));
        assert_eq!(check(&banana, "banana", None).unwrap(), None);
        let err = check(&banana, "logistic", None).unwrap_err().to_string();
        assert_eq!(
            err,
            "net.json: the surrogate was trained on model \"banana\", not on this run's model \
             \"logistic\""
        );
        let a = meta("logistic", Some(Some("a.csv")));
        assert_eq!(check(&a, "logistic", Some("a.csv")).unwrap(), None);
        let err = check(&a, "logistic", Some("b.csv"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "net.json: the surrogate was trained on data \"a.csv\", this run is on data \
             \"b.csv\""
        );
        assert!(check(&a, "logistic", None).is_err());
    }

    #[test]
    fn a_file_that_records_no_data_loads_with_a_warning() {
        let old = meta("logistic", None);
        let warning = check_meta(&old, Path::new("old.json"), "logistic", Some("a.csv"))
            .unwrap()
            .unwrap();
        assert!(
            warning.starts_with("old.json does not record the data"),
            "{warning}"
        );
        assert!(warning.ends_with("trained on \"a.csv\""), "{warning}");
    }

    #[test]
    fn an_absent_data_field_reads_as_unrecorded_and_null_as_none() {
        let json = |data: &str| {
            format!(
                r#"{{"model":"m",{data}"method":"potential","scale":"1.0",
                "holdout_gradient_error":"NaN","holdout_value_rmse":"NaN","training_states":1,
                "ridge":"NaN","seed":0,"train_seconds":"NaN"}}"#
            )
        };
        let read = |text: String| serde_json::from_str::<SurrogateMeta>(&text).unwrap().data;
        assert_eq!(read(json("")), None);
        assert_eq!(read(json(r#""data":null,"#)), Some(None));
        assert_eq!(read(json(r#""data":"a.csv","#)), Some(Some("a.csv".into())));
        let written = serde_json::to_string(&meta("m", Some(None))).unwrap();
        assert_eq!(read(written), Some(None));
    }
}
