//! The network's record in a surrogate file (kind [`KIND`]): the unit kind, the input
//! transform, the *raw* input parameters (in transformed coordinates, as [`Network::from_raw`]
//! takes them), the output weights and bias, so that loading repeats exactly the construction
//! that made the network. A network only exposes its stored parameters (transform folded in),
//! so saving recovers raw parameters that fold back to the stored ones bit for bit (a few-ulp
//! search around the obvious inverse) and checks that they do.

use std::path::Path;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use shmc_core::linalg::dot;
use shmc_core::{Activation, InputTransform, Network, Nodes};

use super::options::DynNetwork;
use super::reach::Reach;
use crate::surrogates::SurrogateMeta;
use crate::surrogates::file::{self, SurrogateFile};
use crate::{Error, Result};

/// The kind name of a network in a surrogate file.
pub const KIND: &str = "network";

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
        #[serde(with = "crate::surrogates::exact_floats")]
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
pub(crate) struct NetworkRecord {
    dim: usize,
    hidden: usize,
    nodes: NodesRecord,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    centre: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    scale: Vec<f64>,
    /// `d × s`, column per unit, in transformed coordinates.
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    raw_weights: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    raw_offsets: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats::vec")]
    output: Vec<f64>,
    #[serde(with = "crate::surrogates::exact_floats")]
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
    pub(crate) fn from_network(network: &DynNetwork) -> std::result::Result<Self, String> {
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
    pub(crate) fn build(&self) -> std::result::Result<DynNetwork, String> {
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

/// A network's file record: the network, and the reach of its training states (absent in
/// files written before networks had one: everywhere).
#[derive(Serialize, Deserialize)]
struct NetworkFileRecord {
    #[serde(flatten)]
    network: NetworkRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reach: Option<Reach>,
}

/// Writes `network`, its `reach` and `meta` to the surrogate file `path`, from which [`read`]
/// rebuilds them bit for bit.
pub(super) fn write(
    network: &DynNetwork,
    reach: Option<&Reach>,
    path: &Path,
    meta: &SurrogateMeta,
) -> Result<()> {
    let record = NetworkFileRecord {
        network: NetworkRecord::from_network(network)
            .map_err(|m| Error::invalid(format!("{}: {m}", path.display())))?,
        reach: reach.cloned(),
    };
    file::write(path, KIND, meta, &record)
}

/// The network a surrogate file of kind [`KIND`] holds, its reach, and the meta of its fit.
pub(super) fn read(file: &SurrogateFile) -> Result<(DynNetwork, Option<Reach>, SurrogateMeta)> {
    let (record, meta): (NetworkFileRecord, SurrogateMeta) = file.read()?;
    let network = record.network.build().map_err(|m| file.invalid(m))?;
    if let Some(reach) = &record.reach {
        reach.check(network.dim()).map_err(|m| file.invalid(m))?;
    }
    Ok((network, record.reach, meta))
}
