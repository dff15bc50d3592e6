//! A Gaussian process's record in a surrogate file (kinds [`FULL_KIND`] and [`FITC_KIND`]):
//! the predictive mean's centres, weights, length scales and offset, its quadratic mean function
//! if it has one, its slopes and `gradients: true` if it was fitted to gradients too (a file
//! from before derivative observations has neither and loads as a GP on values), as exact decimal strings, and the reach of its training states. Loading builds the same [`Predictor`] from the same
//! numbers, so a loaded surrogate proposes bit for bit as the fitted one did; the covariance
//! and its factors are not kept (the mean is all a sampler asks).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::kernel::Predictor;
use super::quadratic::Quadratic;
use crate::Result;
use crate::surrogates::SurrogateMeta;
use crate::surrogates::file::{self, SurrogateFile};
use crate::surrogates::network::Reach;

/// The kind name of a full Gaussian process in a surrogate file.
pub const FULL_KIND: &str = "gp";

/// The kind name of a FITC sparse Gaussian process in a surrogate file.
pub const FITC_KIND: &str = "fitc";

#[derive(Serialize, Deserialize)]
struct GpRecord {
    dim: usize,
    /// `m × d`, row-major.
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    centres: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    weights: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    lengths: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats")]
    offset: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reach: Option<Reach>,
    /// The quadratic mean function, if the GP was fitted on its residuals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quadratic: Option<QuadraticRecord>,
    /// Whether the GP was fitted to the states' gradients too (derivative observations).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    gradients: bool,
    /// `m × d`, row-major: the centres' slopes, when `gradients`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "crate::surrogates::exact_floats::vec"
    )]
    slopes: Vec<f64>,
}

/// A [`Quadratic`]'s coefficients as exact decimal strings.
#[derive(Serialize, Deserialize)]
struct QuadraticRecord {
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    centre: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats")]
    constant: f64,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    linear: Vec<f64>,
    /// `d × d`, row-major.
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    hessian: Vec<f64>,
}

/// Writes `predictor` and `reach` under `kind` with `meta` to `path`.
pub(super) fn write(
    kind: &str,
    predictor: &Predictor,
    reach: Option<&Reach>,
    path: &Path,
    meta: &SurrogateMeta,
) -> Result<()> {
    let (centres, weights, lengths, offset) = predictor.parts();
    let record = GpRecord {
        dim: predictor.dim(),
        centres: centres.to_vec(),
        weights: weights.to_vec(),
        lengths: lengths.to_vec(),
        offset,
        reach: reach.cloned(),
        quadratic: predictor.quadratic().map(|q| QuadraticRecord {
            centre: q.centre.clone(),
            constant: q.constant,
            linear: q.linear.clone(),
            hessian: q.hessian.clone(),
        }),
        gradients: predictor.slopes().is_some(),
        slopes: predictor.slopes().map(<[f64]>::to_vec).unwrap_or_default(),
    };
    file::write(path, kind, meta, &record)
}

/// The predictive mean and reach a surrogate file of a Gaussian-process kind holds, and the
/// meta of its fit; an error naming the file when the record is inconsistent.
pub(super) fn read(file: &SurrogateFile) -> Result<(Predictor, Option<Reach>, SurrogateMeta)> {
    let (record, meta): (GpRecord, SurrogateMeta) = file.read()?;
    if record.lengths.len() != record.dim {
        return Err(file.invalid(format!(
            "{} length scales for dimension {}",
            record.lengths.len(),
            record.dim
        )));
    }
    let predictor = Predictor::new(
        record.centres,
        record.weights,
        record.lengths,
        record.offset,
    )
    .map_err(|m| file.invalid(m))?;
    let quadratic = record.quadratic.map(|q| Quadratic {
        centre: q.centre,
        constant: q.constant,
        linear: q.linear,
        hessian: q.hessian,
    });
    if let Some(q) = &quadratic {
        q.check(record.dim).map_err(|m| file.invalid(m))?;
    }
    let mut predictor = predictor.with_quadratic(quadratic);
    if record.gradients {
        predictor = predictor
            .with_slopes(record.slopes)
            .map_err(|m| file.invalid(m))?;
    } else if !record.slopes.is_empty() {
        return Err(file.invalid("slopes for a GP not fitted to gradients"));
    }
    if let Some(reach) = &record.reach {
        reach.check(record.dim).map_err(|m| file.invalid(m))?;
    }
    Ok((predictor, record.reach, meta))
}
