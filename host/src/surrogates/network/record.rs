//! Surrogate files: a network and its metadata as JSON, rebuilt bit for bit on loading.
//!
//! The file holds the unit kind, the input transform, the *raw* input parameters (in transformed
//! coordinates, as [`Network::from_raw`] takes them), the output weights and bias, so that loading
//! repeats exactly the construction that made the network. A network only exposes its stored
//! parameters (transform folded in), so saving recovers raw parameters that fold back to the
//! stored ones bit for bit (a few-ulp search around the obvious inverse) and checks that they do.
//! Every float is written as a string in Rust's shortest round-trip form (`"0.1"`, `"-3e-7"`,
//! `"NaN"`) and parsed with Rust's correctly rounded parser: JSON numbers through serde_json are
//! only best-effort in the last bit.

use std::path::Path;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use shmc_core::linalg::dot;
use shmc_core::{Activation, InputTransform, Network, Nodes};

use super::DynNetwork;
use crate::surrogates::FitMethod;
use crate::{Error, Result};

/// The `format` field of a surrogate file.
pub const FORMAT_NAME: &str = "shmc-surrogate";

/// The version of the surrogate file format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// What a surrogate file records about how its network was made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SurrogateMeta {
    /// The model (target) the surrogate was trained for.
    pub model: String,
    /// What the output weights were fitted to.
    pub method: FitMethod,
    /// The scale factor `c` of the input transform.
    #[serde(with = "exact")]
    pub scale: f64,
    /// The held-out relative RMS gradient error (NaN if unknown).
    #[serde(with = "exact")]
    pub holdout_gradient_error: f64,
    /// The held-out RMS error of the potential (NaN if unknown).
    #[serde(with = "exact")]
    pub holdout_value_rmse: f64,
    /// The number of training states.
    pub training_states: usize,
    /// The ridge parameter.
    #[serde(with = "exact")]
    pub ridge: f64,
    /// The seed of the random input parameters.
    pub seed: u64,
    /// Wall time of the training, in seconds.
    #[serde(with = "exact")]
    pub train_seconds: f64,
}

impl Default for SurrogateMeta {
    fn default() -> Self {
        Self {
            model: String::new(),
            method: FitMethod::default(),
            scale: f64::NAN,
            holdout_gradient_error: f64::NAN,
            holdout_value_rmse: f64::NAN,
            training_states: 0,
            ridge: f64::NAN,
            seed: 0,
            train_seconds: f64::NAN,
        }
    }
}

/// Floats as exact decimal strings.
mod exact {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{x:?}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|_| D::Error::custom(format!("{text:?} is not a number")))
    }
}

/// Vectors of floats as arrays of exact decimal strings.
mod exact_vec {
    use serde::{Deserialize, Deserializer, Serializer, de::Error, ser::SerializeSeq};

    pub fn serialize<S: Serializer>(x: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(x.len()))?;
        for v in x {
            seq.serialize_element(&format!("{v:?}"))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let text = Vec::<String>::deserialize(d)?;
        text.iter()
            .map(|t| {
                t.parse()
                    .map_err(|_| D::Error::custom(format!("{t:?} is not a number")))
            })
            .collect()
    }
}

#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
struct SurrogateFile {
    format: String,
    version: u32,
    meta: SurrogateMeta,
    network: NetworkRecord,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ActivationRecord {
    Softplus,
    Sigmoid,
    Tanh,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum NodesRecord {
    Additive {
        activation: ActivationRecord,
    },
    Rbf {
        #[serde(with = "exact")]
        width: f64,
    },
}

impl From<Nodes> for NodesRecord {
    fn from(nodes: Nodes) -> Self {
        match nodes {
            Nodes::Additive(a) => NodesRecord::Additive {
                activation: match a {
                    Activation::Softplus => ActivationRecord::Softplus,
                    Activation::Sigmoid => ActivationRecord::Sigmoid,
                    Activation::Tanh => ActivationRecord::Tanh,
                },
            },
            Nodes::Rbf { width } => NodesRecord::Rbf { width },
        }
    }
}

impl From<NodesRecord> for Nodes {
    fn from(nodes: NodesRecord) -> Self {
        match nodes {
            NodesRecord::Additive { activation } => Nodes::Additive(match activation {
                ActivationRecord::Softplus => Activation::Softplus,
                ActivationRecord::Sigmoid => Activation::Sigmoid,
                ActivationRecord::Tanh => Activation::Tanh,
            }),
            NodesRecord::Rbf { width } => Nodes::Rbf { width },
        }
    }
}

/// A network as [`Network::from_raw`] takes it, plus its output layer.
#[derive(Serialize, Deserialize)]
struct NetworkRecord {
    dim: usize,
    hidden: usize,
    nodes: NodesRecord,
    #[serde(with = "exact_vec")]
    centre: Vec<f64>,
    #[serde(with = "exact_vec")]
    scale: Vec<f64>,
    /// `d × s`, column per unit, in transformed coordinates.
    #[serde(with = "exact_vec")]
    raw_weights: Vec<f64>,
    #[serde(with = "exact_vec")]
    raw_offsets: Vec<f64>,
    #[serde(with = "exact_vec")]
    output: Vec<f64>,
    #[serde(with = "exact")]
    bias: f64,
}

/// A float `r` near `start` with `f(r) == target` bit for bit, `f` non-decreasing; a few ulps of
/// search. Returns the last try if none is found (the caller's check then fails).
fn invert(target: f64, start: f64, f: impl Fn(f64) -> f64) -> f64 {
    let mut r = start;
    for _ in 0..64 {
        let y = f(r);
        if y.to_bits() == target.to_bits() || y == target {
            return r;
        }
        r = if y < target {
            r.next_up()
        } else {
            r.next_down()
        };
    }
    r
}

impl NetworkRecord {
    /// The record of `network`, with raw parameters that rebuild it bit for bit.
    fn from_network(network: &DynNetwork) -> std::result::Result<Self, String> {
        let (d, s) = (network.dim(), network.hidden());
        let transform = network.transform();
        let (centre, scale) = (transform.centre.as_slice(), transform.scale.as_slice());
        let stored = network.weights().as_slice();
        let mut raw_weights = vec![0.0; d * s];
        let mut raw_offsets = vec![0.0; s];
        match network.nodes() {
            Nodes::Additive(_) => {
                // Stored: wᵢ/scale and dᵢ − (wᵢ/scale)·centre.
                for i in 0..s {
                    let col = &stored[i * d..(i + 1) * d];
                    for k in 0..d {
                        raw_weights[i * d + k] =
                            invert(col[k], col[k] * scale[k], |r| r / scale[k]);
                    }
                    let shift = dot(col, centre);
                    let offset = network.offsets()[i];
                    raw_offsets[i] = invert(offset, offset + shift, |r| r - shift);
                }
            }
            Nodes::Rbf { .. } => {
                // Stored: centre + scale·cᵢ.
                for i in 0..s {
                    for k in 0..d {
                        let x = stored[i * d + k];
                        raw_weights[i * d + k] =
                            invert(x, (x - centre[k]) / scale[k], |r| centre[k] + scale[k] * r);
                    }
                }
            }
        }
        let record = Self {
            dim: d,
            hidden: s,
            nodes: network.nodes().into(),
            centre: centre.to_vec(),
            scale: scale.to_vec(),
            raw_weights,
            raw_offsets,
            output: network.output().as_slice().to_vec(),
            bias: network.bias(),
        };
        let rebuilt = record.build().map_err(|e| e.to_string())?;
        let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        if !same(rebuilt.weights().as_slice(), stored)
            || !same(rebuilt.offsets().as_slice(), network.offsets().as_slice())
        {
            return Err("the network's input parameters cannot be stored bit-identically".into());
        }
        Ok(record)
    }

    /// The network this record describes.
    fn build(&self) -> std::result::Result<DynNetwork, String> {
        let (d, s) = (self.dim, self.hidden);
        if s == 0 {
            return Err("the network has no hidden units".into());
        }
        for (name, len, want) in [
            ("centre", self.centre.len(), d),
            ("scale", self.scale.len(), d),
            ("raw_weights", self.raw_weights.len(), d * s),
            ("raw_offsets", self.raw_offsets.len(), s),
            ("output", self.output.len(), s),
        ] {
            if len != want {
                return Err(format!(
                    "{name} has {len} entries, expected {want} (dimension {d}, {s} units)"
                ));
            }
        }
        let transform = InputTransform::new(
            DVector::from_column_slice(&self.centre),
            DVector::from_column_slice(&self.scale),
        )
        .map_err(|e| e.to_string())?;
        let mut network = Network::from_raw(
            self.nodes.into(),
            transform,
            DMatrix::from_column_slice(d, s, &self.raw_weights),
            DVector::from_column_slice(&self.raw_offsets),
        )
        .map_err(|e| e.to_string())?;
        network
            .set_output(&self.output, self.bias)
            .map_err(|e| e.to_string())?;
        Ok(network)
    }
}

/// Writes `network` and `meta` to the JSON file `path` (format [`FORMAT_NAME`] version
/// [`FORMAT_VERSION`]), from which [`load_network`] rebuilds the network bit for bit.
pub fn save_network(network: &DynNetwork, path: &Path, meta: &SurrogateMeta) -> Result<()> {
    let record = NetworkRecord::from_network(network)
        .map_err(|m| Error::invalid(format!("{}: {m}", path.display())))?;
    let file = SurrogateFile {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        meta: meta.clone(),
        network: record,
    };
    let text = serde_json::to_string(&file)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// Reads a surrogate file written by [`save_network`] for a model of dimension `expected_dim`.
///
/// A file that is not valid JSON of this format, of another format version, for another
/// dimension, or whose network is inconsistent is an error naming the file.
pub fn load_network(path: &Path, expected_dim: usize) -> Result<(DynNetwork, SurrogateMeta)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let malformed = |e: serde_json::Error| Error::Data {
        path: path.to_path_buf(),
        line: e.line().max(1),
        message: format!("not a valid surrogate file: {e}"),
    };
    let header: Header = serde_json::from_str(&text).map_err(malformed)?;
    let invalid = |m: String| Error::invalid(format!("{}: {m}", path.display()));
    if header.format != FORMAT_NAME {
        return Err(invalid(format!(
            "not a surrogate file (format {:?}, expected {FORMAT_NAME:?})",
            header.format
        )));
    }
    if header.version != FORMAT_VERSION {
        return Err(invalid(format!(
            "surrogate file format version {} is not supported (this build reads version \
             {FORMAT_VERSION})",
            header.version
        )));
    }
    let file: SurrogateFile = serde_json::from_str(&text).map_err(malformed)?;
    if file.network.dim != expected_dim {
        return Err(invalid(format!(
            "the surrogate is for dimension {}, but the model has dimension {expected_dim}",
            file.network.dim
        )));
    }
    let network = file.network.build().map_err(invalid)?;
    Ok((network, file.meta))
}
