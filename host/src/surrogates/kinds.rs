//! Every kind of surrogate, in one place: [`SurrogateKind`], the settings a method fits one
//! with (one variant per kind, holding that kind's own fitter), and [`load`], which reads a saved
//! one by the name its file gives. A new kind is its own module, a variant here with its arm in
//! [`SurrogateKind::fitter`], and its line in [`read`].

use std::path::Path;

use super::anchored::{self, Anchored};
use super::file::SurrogateFile;
use super::gp::{FITC_KIND, FULL_KIND, GpFitter, GpSurrogate};
use super::grids::{FORCE_GRID_KIND, ForceGrid, GridFitter, SPARSE_GRID_KIND, SparseGrid};
use super::network::{self, NetworkFitter, NetworkSurrogate};
use super::{Fitter, Surrogate, SurrogateMeta};
use crate::Result;

/// Which kind of surrogate a method fits, with that kind's own settings.
#[derive(Clone, Debug, PartialEq)]
pub enum SurrogateKind {
    /// The random network of the papers, fitted to the states' potentials or gradients.
    Network(NetworkFitter),
    /// A force grid or a sparse grid over a box (grid HMC, sparse-grid HMC).
    Grid(GridFitter),
    /// A Gaussian process, full or FITC (Rasmussen 2003's surrogate, the papers' baseline).
    Gp(GpFitter),
}

impl Default for SurrogateKind {
    /// The papers' network with its default options, fitted to potential values.
    fn default() -> Self {
        SurrogateKind::Network(NetworkFitter::default())
    }
}

impl SurrogateKind {
    /// How a surrogate of this kind is fitted.
    pub fn fitter(&self) -> &dyn Fitter {
        match self {
            SurrogateKind::Network(network) => network,
            SurrogateKind::Grid(grid) => grid,
            SurrogateKind::Gp(gp) => gp,
        }
    }

    /// The network's settings, if the kind is the network: what the methods built on its
    /// weights (RNS-RMHMC's metric, the Laplace-anchored residual, online learning) need.
    pub fn network(&self) -> Option<&NetworkFitter> {
        match self {
            SurrogateKind::Network(network) => Some(network),
            _ => None,
        }
    }

    /// The grid's settings, if the kind is a grid: its kind names the method (`grid-hmc`,
    /// `sg-hmc`).
    pub fn grid(&self) -> Option<&GridFitter> {
        match self {
            SurrogateKind::Grid(grid) => Some(grid),
            _ => None,
        }
    }
}

/// The kinds this build reads.
const KINDS: [&str; 6] = [
    network::KIND,
    FORCE_GRID_KIND,
    SPARSE_GRID_KIND,
    anchored::KIND,
    FULL_KIND,
    FITC_KIND,
];

/// Reads the surrogate file `path` (written by [`Surrogate::save`]) for a model of dimension
/// `dim`: the surrogate, of the kind the file names, and the meta of its fit.
///
/// A file that is not a surrogate file, of a kind this build does not know, for another
/// dimension, or whose record is inconsistent is an error naming the file.
pub fn load(path: &Path, dim: usize) -> Result<(Box<dyn Surrogate>, SurrogateMeta)> {
    read(SurrogateFile::open(path)?, dim)
}

/// The surrogate an opened surrogate file holds, for a model of dimension `dim`, with the meta
/// of its fit: what [`load`] does once the file is read (and what a caller holding the text in
/// memory uses, through [`SurrogateFile::parse`]).
pub fn read(file: SurrogateFile, dim: usize) -> Result<(Box<dyn Surrogate>, SurrogateMeta)> {
    let (surrogate, meta): (Box<dyn Surrogate>, SurrogateMeta) =
        match file.kind().unwrap_or(network::KIND) {
            network::KIND => {
                let (network, meta) = NetworkSurrogate::read(&file)?;
                (Box::new(network), meta)
            }
            FORCE_GRID_KIND => {
                let (grid, meta) = ForceGrid::read(&file)?;
                (Box::new(grid), meta)
            }
            SPARSE_GRID_KIND => {
                let (grid, meta) = SparseGrid::read(&file)?;
                (Box::new(grid), meta)
            }
            anchored::KIND => {
                let (surrogate, meta) = Anchored::read(&file)?;
                (Box::new(surrogate), meta)
            }
            FULL_KIND | FITC_KIND => {
                let (surrogate, meta) = GpSurrogate::read(&file)?;
                (Box::new(surrogate), meta)
            }
            other => {
                return Err(file.invalid(format!(
                    "unknown surrogate kind {other:?} (this build reads {})",
                    KINDS.join(", ")
                )));
            }
        };
    if surrogate.dim() != dim {
        return Err(file.invalid(format!(
            "the surrogate is for dimension {}, but the model has dimension {dim}",
            surrogate.dim()
        )));
    }
    Ok((surrogate, meta))
}
